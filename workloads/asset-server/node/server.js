// asset-server, the Node.js build (node-gzip): the shape the story started from. Node's own
// http, zlib (gzip, level 6 by default, on libuv's thread pool) and crypto (AES-256-GCM).
// Same wire format and per-request work as the Rust builds (src/main.rs):
//   GET /models/<name>?licence=<text>
//   200: nonce (12) ‖ AES-256-GCM(gzip(model with its licence set)) ‖ tag (16)
//        x-asset-codec: gzip; x-asset-size: the model's size
// Run by asset-server-node, which starts it under `node --perf-basic-prof`, so a profiler
// names its JavaScript functions from /tmp/perf-<pid>.map.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const path = require('path');
const zlib = require('zlib');

const KEY = Buffer.from('switchyard-asset-server-key-0001', 'latin1');
const PLACEHOLDER = 'unlicensed-00000000000000000000000000000000';
const PIECE = 256 * 1024;

function parseArgs(argv) {
  const args = { models: null, port: 0, exitAfterIdle: null, level: 6 };
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i + 1];
    switch (argv[i]) {
      case '--models': args.models = v; i++; break;
      case '--port': args.port = Number(v); i++; break;
      case '--exit-after-idle': args.exitAfterIdle = Number(v); i++; break;
      case '--level': args.level = Number(v); i++; break;
      default: throw new Error(`unknown argument ${argv[i]}`);
    }
  }
  if (!args.models) throw new Error('--models DIR is required');
  return args;
}

function loadModels(dir) {
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
  const models = new Map();
  for (const m of manifest.models) models.set(m.name, fs.readFileSync(path.join(dir, m.name)));
  return models;
}

// The GLB's header and chunk table, its JSON parsed, and where the licence's characters are.
function parseGlb(buf) {
  if (buf.length < 12 || buf.toString('latin1', 0, 4) !== 'glTF') throw new Error('not a GLB');
  if (buf.readUInt32LE(4) !== 2) throw new Error('GLB version is not 2');
  if (buf.readUInt32LE(8) !== buf.length) throw new Error('GLB length mismatch');
  let at = 12;
  const chunks = [];
  while (at < buf.length) {
    const len = buf.readUInt32LE(at);
    const type = buf.readUInt32LE(at + 4);
    const start = at + 8;
    if (start + len > buf.length) throw new Error('GLB chunk past the end');
    chunks.push({ type, start, end: start + len });
    at = start + len;
  }
  const json = chunks[0];
  if (!json || json.type !== 0x4e4f534a) throw new Error('GLB has no JSON chunk first');
  const doc = JSON.parse(buf.toString('utf8', json.start, json.end));
  if (!doc.asset || !doc.asset.extras || doc.asset.extras.licence !== PLACEHOLDER) {
    throw new Error('asset.extras.licence is missing');
  }
  const needle = `"${PLACEHOLDER}"`;
  const pos = buf.indexOf(needle, json.start, 'latin1');
  if (pos < 0 || pos >= json.end) throw new Error('licence placeholder not found');
  return { licenceAt: pos + 1 };
}

function licenceBytes(text) {
  let s = '';
  for (const c of text) {
    if (/[A-Za-z0-9.-]/.test(c)) s += c;
    if (s.length === PLACEHOLDER.length) break;
  }
  return s.padEnd(PLACEHOLDER.length, '-');
}

function withLicence(model, parsed, licence) {
  const out = Buffer.from(model);
  out.write(licence, parsed.licenceAt, 'latin1');
  return out;
}

const noncePrefix = crypto.randomBytes(4);
let nonceCounter = 0n;

function seal(data) {
  const nonce = Buffer.alloc(12);
  noncePrefix.copy(nonce, 0);
  nonce.writeBigUInt64LE(nonceCounter++, 4);
  const cipher = crypto.createCipheriv('aes-256-gcm', KEY, nonce);
  const body = Buffer.concat([cipher.update(data), cipher.final()]);
  return Buffer.concat([nonce, body, cipher.getAuthTag()]);
}

function streamBody(res, body) {
  let at = 0;
  const pump = () => {
    while (at < body.length) {
      const end = Math.min(at + PIECE, body.length);
      const more = res.write(body.subarray(at, end));
      at = end;
      if (!more) {
        res.once('drain', pump);
        return;
      }
    }
    res.end();
  };
  pump();
}

function fail(res, status, text) {
  res.writeHead(status, { 'content-type': 'text/plain' });
  res.end(text + '\n');
}

function handleModel(models, level, req, res) {
  const url = new URL(req.url, 'http://localhost');
  const name = url.pathname.startsWith('/models/') ? url.pathname.slice('/models/'.length) : null;
  const model = name === null ? undefined : models.get(name);
  if (!model) return fail(res, 404, `no model ${url.pathname}`);
  let served;
  try {
    const parsed = parseGlb(model);
    served = withLicence(model, parsed, licenceBytes(url.searchParams.get('licence') || 'anonymous'));
  } catch (e) {
    return fail(res, 500, e.message);
  }
  zlib.gzip(served, { level }, (err, packed) => {
    if (err) return fail(res, 500, err.message);
    const body = seal(packed);
    res.writeHead(200, {
      'content-length': body.length,
      'content-type': 'application/octet-stream',
      'x-asset-codec': 'gzip',
      'x-asset-size': served.length,
    });
    streamBody(res, body);
  });
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const models = loadModels(args.models);
  let connections = 0;
  let seen = false;
  let idleSince = Date.now();
  const server = http.createServer((req, res) => handleModel(models, args.level, req, res));
  server.keepAliveTimeout = 60000;
  server.on('connection', (socket) => {
    connections++;
    seen = true;
    socket.setNoDelay(true);
    socket.on('close', () => { connections--; idleSince = Date.now(); });
  });
  server.listen(args.port, '127.0.0.1', () => {
    process.stdout.write(`ready ${server.address().port}\n`);
  });
  if (args.exitAfterIdle !== null) {
    setInterval(() => {
      if (seen && connections === 0 && Date.now() - idleSince >= args.exitAfterIdle) process.exit(0);
    }, 50).unref();
  }
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
}

main();
