// An http server for test_node.py: each request's body is hashed and
// answered with {sha256, length} and a body made from the request's path,
// and a line is appended to a log file (a file opened and closed per
// request, so that file and socket fds reuse each other's numbers).
"use strict";
const crypto = require("crypto");
const fs = require("fs");
const http = require("http");

const log = process.argv[2];

function bodyFor(path) {
  const n = Number(new URL(path, "http://x").searchParams.get("reply"));
  const out = Buffer.alloc(n);
  for (let i = 0; i < n; i++) out[i] = (i * 131 + n) & 255;
  return out;
}

const server = http.createServer((req, res) => {
  const hash = crypto.createHash("sha256");
  let length = 0;
  req.on("data", (chunk) => {
    hash.update(chunk);
    length += chunk.length;
  });
  req.on("end", () => {
    const sha256 = hash.digest("hex");
    fs.appendFileSync(log, `${req.url} ${length} ${sha256}\n`);
    const body = bodyFor(req.url);
    res.setHeader("x-request-sha256", sha256);
    res.setHeader("x-request-length", String(length));
    res.setHeader("content-length", String(body.length));
    // Small writes: the head, then the body in pieces.
    for (let at = 0; at < body.length; at += 100) res.write(body.subarray(at, at + 100));
    res.end();
  });
});
// Each closed connection is noted in a second log, written right after its
// socket's fd was closed: the file usually gets the socket's number.
let connections = 0;
server.on("connection", (socket) => {
  connections++;
  socket.on("close", () => {
    const fd = fs.openSync(`${log}.connections`, "a");
    fs.writeSync(fd, "closed\n");
    fs.closeSync(fd);
  });
});
server.keepAliveTimeout = 200;
server.listen(0, "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});
// At the end, the number of connections: one "closed" line each.
process.on("SIGTERM", () => {
  server.close(() => {
    fs.writeFileSync(`${log}.count`, String(connections));
    process.exit(0);
  });
  server.closeAllConnections();
});
