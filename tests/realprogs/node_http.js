// An HTTP server and client on Node's own http module, run under the shim as
// real Node.js programs are (libuv, non-blocking sockets, writev).
//
//   node node_http.js server LOGFILE
//     Listens on 127.0.0.1 (a free port), prints "listening PORT", answers
//     every request with a 2000-byte body and appends one line per request to
//     LOGFILE (regular-file writes, which are not TCP). Exits 0 on SIGTERM.
//   node node_http.js client PORT REQUESTS
//     REQUESTS GETs in turn over one keep-alive connection; prints
//     {"pid", "requests", "received"} (body bytes) as one JSON line.
'use strict';
const fs = require('fs');
const http = require('http');

const BODY = Buffer.alloc(2000, 'n');

function server(logFile) {
  const log = fs.openSync(logFile, 'a');
  const srv = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      fs.writeSync(log, `${req.method} ${req.url}\n`);
      res.writeHead(200, {'Content-Type': 'application/octet-stream', 'Content-Length': BODY.length});
      res.end(BODY);
    });
  });
  srv.listen(0, '127.0.0.1', () => console.log(`listening ${srv.address().port}`));
  process.on('SIGTERM', () => srv.close(() => { fs.closeSync(log); process.exit(0); }));
  srv.keepAliveTimeout = 60000;
}

function client(port, requests) {
  const agent = new http.Agent({keepAlive: true, maxSockets: 1});
  let done = 0;
  let received = 0;
  const next = () => {
    if (done === requests) {
      agent.destroy();
      console.log(JSON.stringify({pid: process.pid, requests: done, received}));
      return;
    }
    http.get({host: '127.0.0.1', port, path: `/${done}`, agent}, (res) => {
      res.on('data', (chunk) => { received += chunk.length; });
      res.on('end', () => { done += 1; next(); });
    }).on('error', (error) => { console.error(error.message); process.exit(1); });
  };
  next();
}

if (process.argv[2] === 'server') server(process.argv[3]);
else if (process.argv[2] === 'client') client(Number(process.argv[3]), Number(process.argv[4]));
else { console.error('usage: node_http.js server LOGFILE | client PORT REQUESTS'); process.exit(2); }
