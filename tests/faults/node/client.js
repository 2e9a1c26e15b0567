// An http client for test_node.py: requests with bodies of random sizes
// (written in small pieces) over kept-alive and fresh connections, each
// checked: the server's hash of the body and the reply body itself.
"use strict";
const crypto = require("crypto");
const http = require("http");

const fs = require("fs");

const [port, count, seed] = process.argv.slice(2, 5).map(Number);
const log = process.argv[5];
let state = seed;
function random(n) {
  state = (state * 1103515245 + 12345) % 2147483648;
  return state % n;
}

function expectedReply(n) {
  const out = Buffer.alloc(n);
  for (let i = 0; i < n; i++) out[i] = (i * 131 + n) & 255;
  return out;
}

const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 8 });
const result = { requests: count, answered: 0, bad_request_hash: 0, bad_reply: 0, errors: [], destroyed: 0 };

function one(i) {
  return new Promise((resolve) => {
    const size = random(20000);
    const reply = random(5000);
    const body = Buffer.alloc(size);
    for (let j = 0; j < size; j++) body[j] = random(256);
    const sha256 = crypto.createHash("sha256").update(body).digest("hex");
    const req = http.request({
      host: "127.0.0.1", port, method: "POST", path: `/r${i}?reply=${reply}`,
      agent: i % 3 === 0 ? false : keepAlive,  // a fresh connection every third request
      headers: { "content-length": String(size) },
    }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        result.answered++;
        if (res.headers["x-request-sha256"] !== sha256 || res.headers["x-request-length"] !== String(size)) {
          result.bad_request_hash++;
        }
        if (!Buffer.concat(chunks).equals(expectedReply(reply))) result.bad_reply++;
        if (i % 3 !== 0) {
          resolve();
          return;
        }
        // Destroyed, not ended: libuv closes the fd with syscall(SYS_close)
        // and no shutdown; a file written right after gets its number.
        res.socket.on("close", () => {
          result.destroyed++;
          const fd = fs.openSync(log, "a");
          fs.writeSync(fd, `destroyed ${i}\n`);
          fs.closeSync(fd);
          resolve();
        });
        res.socket.destroy();
      });
    });
    req.on("error", (e) => { result.errors.push(String(e)); resolve(); });
    for (let at = 0; at < size; at += 500) req.write(body.subarray(at, at + 500));
    req.end();
  });
}

(async () => {
  for (let i = 0; i < count; i += 8) {
    const batch = [];
    for (let j = i; j < Math.min(count, i + 8); j++) batch.push(one(j));
    await Promise.all(batch);
  }
  keepAlive.destroy();
  console.log(JSON.stringify(result));
})();
