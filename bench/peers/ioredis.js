// ioredis.js: the Node.js peer of bench/throughput.
//
// usage: node bench/peers/ioredis.js --port P --stream S --group G [--consumer C] [--batch N]
//
// One consumer of a group, written as an ioredis user would write it:
// XREADGROUP with COUNT and BLOCK, each payment decoded with JSON.parse and one
// field read, then the batch's acks sent in one pipeline. Runs until SIGTERM
// or SIGINT. ioredis comes from bench/peers/node_modules (npm install here).
"use strict";
const Redis = require("ioredis");

function parseArgs(argv) {
  const args = { consumer: "ioredis-0", batch: 100 };
  for (let i = 2; i + 1 < argv.length; i += 2) args[argv[i].replace(/^--/, "")] = argv[i + 1];
  if (!args.port || !args.stream || !args.group) {
    process.stderr.write("usage: node ioredis.js --port P --stream S --group G [--consumer C] [--batch N]\n");
    process.exit(2);
  }
  return args;
}

async function main() {
  const args = parseArgs(process.argv);
  const redis = new Redis({ host: "127.0.0.1", port: Number(args.port) });
  // Stop at once: what is read and not acked stays pending, as anywhere.
  for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));

  let total = 0;
  for (;;) {
    const reply = await redis.xreadgroup("GROUP", args.group, args.consumer, "COUNT", args.batch,
      "BLOCK", 2000, "STREAMS", args.stream, ">");
    if (!reply) continue;
    for (const [, entries] of reply) {
      const pipe = redis.pipeline();
      for (const [id, fields] of entries) {
        let data;
        for (let i = 0; i < fields.length; i += 2) if (fields[i] === "data") data = fields[i + 1];
        const payment = JSON.parse(data);
        total += payment.amount_cents;
        pipe.xack(args.stream, args.group, id);
      }
      await pipe.exec();
    }
  }
}

main().catch((err) => {
  process.stderr.write(`ioredis.js: ${err.stack || err}\n`);
  process.exit(1);
});
