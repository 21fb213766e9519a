// Slow clients: node slow_clients.js URL COUNT HOLD_MS. Opens COUNT connections to URL (http: or https:, trusting
// NODE_EXTRA_CA_CERTS), sends a POST's headers declaring a 100-byte body and one byte of it, then stalls for
// HOLD_MS. Prints one JSON line: how many connections were opened and how many got any answer while stalled.
const net = require("net");
const tls = require("tls");

const [url, countText, holdText] = process.argv.slice(2);
const target = new URL(url);
const count = Number(countText);
const hold = Number(holdText);
const secure = target.protocol === "https:";
const port = Number(target.port) || (secure ? 443 : 80);
const request = `POST ${target.pathname} HTTP/1.1\r\nHost: ${target.host}\r\nContent-Type: application/json\r\n` +
                "Content-Length: 100\r\n\r\n{";
let opened = 0;
let answered = 0;
const sockets = [];
for (let i = 0; i < count; ++i) {
  const socket = secure ? tls.connect({ host: target.hostname, port, servername: target.hostname })
                        : net.connect({ host: target.hostname, port });
  socket.on(secure ? "secureConnect" : "connect", () => { ++opened; socket.write(request); });
  socket.once("data", () => { ++answered; });
  socket.on("error", () => {});
  sockets.push(socket);
}
setTimeout(() => {
  for (const socket of sockets) socket.destroy();
  console.log(JSON.stringify({ opened, answered }));
}, hold);
