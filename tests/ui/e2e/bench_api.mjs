// Latency of `volt ui`'s API, one request at a time from Node's fetch over loopback (keep-alive), as the page
// sends them; also the time from starting `volt ui` to its printed URL. Prints median and 95th percentile.
//   VOLT_BIN=build/tools/volt/volt node tests/ui/e2e/bench_api.mjs [requests per endpoint, default 500]
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

const bin = path.resolve(process.env.VOLT_BIN || 'build/tools/volt/volt');
const n = Number(process.argv[2] || 500);

const started = performance.now();
const server = spawn(bin, ['ui', '--port', '0'], { cwd: os.tmpdir(), stdio: ['ignore', 'pipe', 'ignore'] });
const url = await new Promise((resolve, reject) => {
  let out = '';
  server.stdout.on('data', (d) => {
    out += d;
    const m = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out);
    if (m) resolve(m[1]);
  });
  server.on('exit', (code) => reject(new Error('volt ui exited with ' + code)));
});
console.log(`start-up to URL: ${(performance.now() - started).toFixed(0)} ms (${bin})`);

const ids = (await (await fetch(url + 'api/schema')).json()).templates.map((t) => t.id);
for (const endpoint of ['validate', 'render', 'zip', 'notebook']) {
  const ms = [];
  let bytes = 0;
  for (let i = 0; i < n + 20; i++) {
    const body = JSON.stringify({ template: ids[i % ids.length], backend: i % 2 ? 'xla-tpu' : 'gloo',
                                  max_epochs: 1 + (i % 9) });
    const t = performance.now();
    const r = await fetch(url + 'api/' + endpoint, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    const b = await r.arrayBuffer();
    if (r.status !== 200) throw new Error(`${endpoint}: ${r.status}`);
    if (i >= 20) { ms.push(performance.now() - t); bytes += b.byteLength; }  // 20 warm-up requests
  }
  ms.sort((a, b) => a - b);
  console.log(`${endpoint.padEnd(9)} n=${n}  median ${ms[n >> 1].toFixed(2)} ms  p95 ${ms[Math.floor(n * 0.95)].toFixed(2)} ms` +
              `  mean answer ${(bytes / n / 1024).toFixed(1)} KiB`);
}
server.kill('SIGTERM');
