// `volt ui` end to end: the volt binary serves the page; Debian's Chromium (headless, fresh profile) driven by
// playwright-core uses it as a person would. Run by ctest (ui.e2e) with VOLT_BIN set, or by hand:
//   VOLT_BIN=build/tools/volt/volt node --test tests/ui/e2e/ui.test.mjs
// Artifacts (screenshot) go to $VOLT_UI_ARTIFACTS (default tests/ui/e2e/artifacts); VOLT_UI_SCREENSHOT=path
// also writes the README's screenshot there.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';

let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (e) {
  throw new Error('playwright-core is not installed: run `npm ci` in tests/ui/e2e (scripts/setup.sh does it)');
}

const kChromium = '/usr/bin/chromium';
const kVolt = process.env.VOLT_BIN || path.resolve('../../../build/tools/volt/volt');
const kArtifacts = process.env.VOLT_UI_ARTIFACTS || path.resolve('artifacts');
const kFlags = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
                '--disable-component-update', '--disable-sync', '--disable-quic'];

let server;        // the volt ui process
let serverCwd;     // its working directory: must stay empty
let openedUrl;     // file the fake xdg-open writes its argument to
let baseUrl;
let context;       // browser context with a fresh --user-data-dir
let page;
const foreignRequests = [];
const consoleErrors = [];   // console errors and uncaught exceptions of every page, for the whole run
const failedRequests = [];  // requests that failed or were answered with a status of 400 or more
const downloadsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'volt-ui-downloads-'));

// Starts `volt ui --port 0 --open` in an empty directory, with an xdg-open that only records the URL.
async function startServer() {
  serverCwd = fs.mkdtempSync(path.join(os.tmpdir(), 'volt-ui-cwd-'));
  const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'volt-ui-bin-'));
  openedUrl = path.join(bin, 'opened-url');
  fs.writeFileSync(path.join(bin, 'xdg-open'), `#!/bin/sh\nprintf '%s' "$1" > '${openedUrl}'\n`, { mode: 0o755 });
  server = spawn(kVolt, ['ui', '--port', '0', '--open'], {
    cwd: serverCwd, env: { ...process.env, PATH: bin + ':' + process.env.PATH }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  server.stderr.on('data', (d) => { log += d; });
  baseUrl = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('volt ui printed no URL in 10 s: ' + out + log)), 10000);
    server.stdout.on('data', (d) => {
      out += d;
      const m = /serving the generator at (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    server.on('exit', (code) => reject(new Error(`volt ui exited with ${code}: ${out}${log}`)));
  });
}

before(async () => {
  assert.ok(fs.existsSync(kVolt), `no volt binary at ${kVolt}; build it or set VOLT_BIN`);
  assert.ok(fs.existsSync(kChromium), `${kChromium} is missing: apt-get install chromium (scripts/setup.sh)`);
  fs.mkdirSync(kArtifacts, { recursive: true });
  await startServer();
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'volt-ui-profile-'));
  // launchPersistentContext passes the fresh profile as --user-data-dir.
  context = await chromium.launchPersistentContext(profile, {
    executablePath: kChromium, headless: true, args: kFlags, acceptDownloads: true,
    viewport: { width: 1400, height: 900 },
  });
  context.on('request', (r) => {
    if (!r.url().startsWith(baseUrl) && !r.url().startsWith('blob:') && !r.url().startsWith('data:')) {
      foreignRequests.push(r.url());
    }
  });
  context.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(`${m.page()?.url()}: ${m.text()}`); });
  context.on('weberror', (e) => consoleErrors.push(`uncaught: ${e.error().message}`));
  context.on('requestfailed', (r) => failedRequests.push(`${r.url()}: ${r.failure()?.errorText}`));
  context.on('response', (r) => { if (r.status() >= 400) failedRequests.push(`${r.url()}: ${r.status()}`); });
  page = context.pages()[0] || await context.newPage();
});

after(async () => {
  if (context) await context.close();
  if (server && server.exitCode === null) server.kill('SIGKILL');
});

// Waits until the page has answered the last change.
async function settled(p = page) {
  await p.waitForFunction(() => document.body.dataset.ready === 'true' && document.body.dataset.busy !== 'true');
}
async function fieldState(p, key) {
  return p.evaluate((k) => {
    const row = document.querySelector(`.field[data-key="${k}"]`);
    const input = row.querySelector('input, select');
    return { value: input.type === 'checkbox' ? String(input.checked) : input.value, disabled: input.disabled,
             hidden: row.hidden, hint: row.querySelector('.hint').textContent,
             error: row.querySelector('.error').textContent };
  }, key);
}
async function apiTemplates() {
  const res = await fetch(baseUrl + 'api/schema');
  return (await res.json()).templates;
}

// Runs a `volt new` command line as shown on the page (with `extra` arguments) through a shell, with `volt` being
// the binary under test, in a fresh directory; returns that directory.
function runCommand(command, extra) {
  assert.match(command, /^volt new /);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'volt-ui-cli-'));
  const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'volt-ui-cli-bin-'));
  fs.symlinkSync(path.resolve(kVolt), path.join(bin, 'volt'));
  const r = spawnSync('sh', ['-c', command + ' ' + extra.join(' ')], {
    cwd: dir, env: { ...process.env, PATH: bin + ':' + process.env.PATH }, encoding: 'utf8',
  });
  assert.equal(r.status, 0, `${command}: ${r.stdout}${r.stderr}`);
  return dir;
}

// The names of a zip's entries and a reader of one entry, from its central directory.
function readZip(buf) {
  let eocd = buf.length - 22;
  while (eocd >= 0 && buf.readUInt32LE(eocd) !== 0x06054b50) eocd--;
  assert.ok(eocd >= 0, 'no end-of-central-directory record: not a zip');
  const count = buf.readUInt16LE(eocd + 10);
  let at = buf.readUInt32LE(eocd + 16);
  const entries = {};
  for (let i = 0; i < count; i++) {
    assert.equal(buf.readUInt32LE(at), 0x02014b50, 'bad central directory entry');
    const method = buf.readUInt16LE(at + 10);
    const compressed = buf.readUInt32LE(at + 20);
    const size = buf.readUInt32LE(at + 24);
    const nameLen = buf.readUInt16LE(at + 28);
    const extraLen = buf.readUInt16LE(at + 30);
    const commentLen = buf.readUInt16LE(at + 32);
    const local = buf.readUInt32LE(at + 42);
    const name = buf.toString('utf8', at + 46, at + 46 + nameLen);
    entries[name] = () => {
      const start = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28);
      const data = buf.subarray(start, start + compressed);
      const raw = method === 8 ? zlib.inflateRawSync(data) : data;
      assert.equal(raw.length, size, `${name}: size in the central directory`);
      return raw.toString('utf8');
    };
    at += 46 + nameLen + extraLen + commentLen;
  }
  return entries;
}

test('volt ui --open hands the page URL to the browser', () => {
  assert.equal(fs.readFileSync(openedUrl, 'utf8'), baseUrl);
});

test('picks a template and shows its files with a highlighted preview', async () => {
  await page.goto(baseUrl);
  await settled();
  const templates = await apiTemplates();
  assert.ok(templates.length >= 2, 'the generator offers at least two templates');
  const current = await page.$eval('#templates input:checked', (i) => i.value);
  const pick = templates.find((t) => t.id !== current);
  await page.click(`label[for="template-${pick.id}"]`);
  await settled();
  assert.equal(new URL(page.url()).searchParams.get('template'), pick.id);
  assert.ok(await page.isChecked(`#template-${pick.id}`));
  // The tree lists exactly the generator's files for these options.
  const expected = await (await fetch(baseUrl + 'api/render', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ template: pick.id }),
  })).json();
  const shown = await page.$$eval('#tree button[data-path]', (bs) => bs.map((b) => b.dataset.path).sort());
  assert.deepEqual(shown, Object.keys(expected.files).sort());
  // Open the C++ source: its text is the file's, highlighted.
  const cpp = shown.find((p) => p.endsWith('main.cpp'));
  await page.click(`#tree button[data-path="${cpp}"]`);
  assert.equal(await page.textContent('#preview-path'), `${expected.name}/${cpp}`);
  const text = await page.$eval('#preview code', (c) => [...c.childNodes].map((n) =>
    n.nodeType === 1 && n.classList.contains('ln') ? '' : n.textContent).join(''));
  assert.equal(text, expected.files[cpp]);
  assert.ok(await page.$('#preview .token.keyword'), 'keywords are highlighted');
  assert.ok(await page.$('#preview .token.macro'), '#include lines are highlighted');
  assert.equal(await page.textContent('#command'), expected.command);
});

test('the preview follows the options as they are typed', async () => {
  await page.click('#tab-Training');
  await page.click('#tree button[data-path="config.yaml"]');
  await page.fill('#opt-max_epochs', '12');
  await settled();
  assert.match(await page.textContent('#preview code'), /max_epochs: 12\b/);
  assert.equal(new URL(page.url()).searchParams.get('max_epochs'), '12');
  assert.match(await page.textContent('#command'), /--max-epochs 12/);
  // A value out of range: the generator's message under the field, the typed value kept.
  await page.fill('#opt-batch_size', '0');
  await settled();
  const batch = await fieldState(page, 'batch_size');
  assert.equal(batch.value, '0');
  assert.match(batch.error, /below the minimum 1/);
  await page.fill('#opt-batch_size', '32');
  await settled();
  assert.equal((await fieldState(page, 'batch_size')).error, '');
  assert.match(await page.textContent('#preview code'), /batch_size: 32\b/);
});

test('the Backend field is visible from the default state; xla-tpu forces spawn and 8 processes with reasons', async () => {
  // A fresh page in its default state: distributed off, and the backend can still be picked.
  const fresh = await context.newPage();
  await fresh.goto(baseUrl + '#tab=Training');
  await settled(fresh);
  assert.equal((await fieldState(fresh, 'distributed')).value, 'off');
  assert.equal(await fresh.isVisible('#opt-backend'), true, 'backend shown while distributed is off');
  assert.deepEqual(await fresh.$$eval('#opt-backend option', (o) => o.map((x) => x.value)), ['gloo', 'nccl', 'xla-tpu']);
  await fresh.selectOption('#opt-backend', 'xla-tpu');
  await settled(fresh);
  assert.deepEqual(await fieldState(fresh, 'distributed'), { value: 'spawn', disabled: true, hidden: false,
    hint: 'forced by backend=xla-tpu: XLA starts one process per TPU chip itself; allowed: distributed spawn', error: '' });
  assert.equal((await fieldState(fresh, 'nproc_per_node')).value, '8');
  // The chip count follows the host size.
  assert.equal(await fresh.isVisible('#opt-tpu_chips_per_host'), true);
  await fresh.fill('#opt-tpu_chips_per_host', '4');
  await settled(fresh);
  assert.equal((await fieldState(fresh, 'nproc_per_node')).value, '4');
  assert.match((await fieldState(fresh, 'nproc_per_node')).hint, /tpu_chips_per_host=4/);
  await fresh.close();

  await page.click('#tab-Training');
  assert.equal(await page.isVisible('#opt-max_epochs'), true);
  assert.equal(await page.isVisible('#opt-save_last'), false, 'one tab at a time');
  assert.match(page.url(), /#tab=Training/);
  assert.equal((await fieldState(page, 'backend')).hidden, false);
  await page.selectOption('#opt-backend', 'xla-tpu');
  await settled();
  const distributed = await fieldState(page, 'distributed');
  assert.equal(distributed.value, 'spawn');
  assert.equal(distributed.disabled, true);
  assert.match(distributed.hint, /forced by backend=xla-tpu/);
  const nproc = await fieldState(page, 'nproc_per_node');
  assert.equal(nproc.value, '8');
  assert.equal(nproc.disabled, true);
  assert.match(nproc.hint, /one process per chip/);
  assert.equal((await fieldState(page, 'accelerator')).value, 'tpu');
  assert.equal((await fieldState(page, 'backend')).disabled, false, 'the choice itself stays editable');
  // The command says only what was chosen: the forced values follow from --backend xla-tpu.
  assert.match(await page.textContent('#command'), /--backend xla-tpu/);
  assert.doesNotMatch(await page.textContent('#command'), /--nproc-per-node|--distributed/);
  // The live preview follows: config.yaml now trains on 8 TPU processes.
  await page.click('#tree button[data-path="config.yaml"]');
  const config = await page.textContent('#preview code');
  assert.match(config, /tpu/);
});

test('going back from xla-tpu restores the distributed choice and process count the user had made', async () => {
  const other = await context.newPage();
  await other.goto(baseUrl + '?template=minimal#tab=Training');
  await settled(other);
  await other.selectOption('#opt-distributed', 'launch');
  await settled(other);
  await other.fill('#opt-nproc_per_node', '2');
  await settled(other);
  await other.selectOption('#opt-accelerator', 'cpu');
  await settled(other);
  await other.selectOption('#opt-backend', 'xla-tpu');
  await settled(other);
  assert.equal((await fieldState(other, 'distributed')).value, 'spawn');
  assert.equal((await fieldState(other, 'nproc_per_node')).value, '8');
  assert.equal((await fieldState(other, 'accelerator')).value, 'tpu');
  assert.equal((await fieldState(other, 'distributed')).error, '', 'the latest choice wins');
  assert.equal(new URL(other.url()).searchParams.get('distributed'), null);
  // Other changes while xla-tpu holds keep the earlier choices aside.
  await other.fill('#opt-max_epochs', '5');
  await settled(other);
  assert.equal((await fieldState(other, 'distributed')).value, 'spawn');
  await other.selectOption('#opt-backend', 'gloo');
  await settled(other);
  assert.deepEqual(await fieldState(other, 'distributed'), { value: 'launch', disabled: false, hidden: false,
                                                             hint: '', error: '' });
  assert.deepEqual(await fieldState(other, 'nproc_per_node'), { value: '2', disabled: false, hidden: false,
                                                                hint: '', error: '' });
  assert.equal((await fieldState(other, 'accelerator')).value, 'cpu');
  const q = new URL(other.url()).searchParams;
  assert.equal(q.get('distributed'), 'launch');
  assert.equal(q.get('nproc_per_node'), '2');
  assert.equal(q.get('max_epochs'), '5');
  assert.match(await other.textContent('#command'), /--accelerator cpu --distributed launch --nproc-per-node 2/);
  // From the default state, back from xla-tpu is the default again (distributed off, one process).
  await other.goto(baseUrl + '?template=minimal#tab=Training');
  await settled(other);
  await other.selectOption('#opt-backend', 'xla-tpu');
  await settled(other);
  await other.selectOption('#opt-backend', 'gloo');
  await settled(other);
  assert.equal((await fieldState(other, 'distributed')).value, 'off');
  assert.equal((await fieldState(other, 'nproc_per_node')).hidden, true);
  await other.close();
});

test('an impossible combination shows the generator message next to its field, without a console error', async () => {
  const errorsBefore = consoleErrors.length;
  const failedBefore = failedRequests.length;
  await page.selectOption('#opt-precision', '16-mixed');
  await settled();
  assert.deepEqual(consoleErrors.slice(errorsBefore), [], 'a refused choice is an answer, not an HTTP error');
  assert.deepEqual(failedRequests.slice(failedBefore), []);
  const precision = await fieldState(page, 'precision');
  assert.match(precision.error, /16-mixed is impossible with backend=xla-tpu/);
  assert.equal(await page.getAttribute('#opt-precision', 'aria-invalid'), 'true');
  assert.equal(await page.isDisabled('#download-zip'), true, 'no download of an invalid project');
  assert.equal(await page.isVisible('#stale'), true);
  await page.selectOption('#opt-precision', 'bf16-mixed');
  await settled();
  assert.equal((await fieldState(page, 'precision')).error, '');
  assert.equal(await page.isDisabled('#download-zip'), false);
});

test('downloads a Colab notebook whose accelerator is TPU', async () => {
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download-notebook')]);
  assert.match(download.suggestedFilename(), /\.ipynb$/);
  const file = path.join(downloadsDir, download.suggestedFilename());
  await download.saveAs(file);
  const text = fs.readFileSync(file, 'utf8');
  const nb = JSON.parse(text);
  assert.equal(nb.nbformat, 4);
  assert.equal(nb.metadata.accelerator, 'TPU');
  assert.match(JSON.stringify(nb.cells), /xla|tpu|TPU/);
  // The notebook records exactly the page's command (no forced values added), and that command run in a shell
  // writes the same notebook, byte for byte.
  const command = await page.textContent('#command');
  assert.equal(nb.metadata.volt.command, command);
  assert.ok(nb.cells[0].source.join('').includes('\n    ' + command + '\n'), 'the first cell shows the command');
  const cli = runCommand(command, ['--no-write', '--notebook', 'cli.ipynb']);
  assert.equal(fs.readFileSync(path.join(cli, 'cli.ipynb'), 'utf8'), text);
});

test('downloads a zip holding every previewed file', async () => {
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download-zip')]);
  assert.match(download.suggestedFilename(), /\.zip$/);
  const file = path.join(downloadsDir, download.suggestedFilename());
  await download.saveAs(file);
  const entries = readZip(fs.readFileSync(file));
  const name = (await page.textContent('#preview-path')).split('/')[0];
  const shown = await page.$$eval('#tree button[data-path]', (bs) => bs.map((b) => b.dataset.path));
  for (const p of shown) assert.ok(`${name}/${p}` in entries, `zip lacks ${name}/${p}`);
  for (const e of Object.keys(entries)) {
    assert.ok(e.startsWith(name + '/') && !e.split('/').includes('..'), `bad entry ${e}`);
  }
  const config = entries[`${name}/config.yaml`]();
  const previewed = await page.$eval('#preview code', (c) => [...c.childNodes].map((n) =>
    n.nodeType === 1 && n.classList.contains('ln') ? '' : n.textContent).join(''));
  assert.equal(config, previewed, 'the zip holds the previewed config.yaml');
  // The zip's README records the page's command.
  const readme = entries[`${name}/README.md`]();
  assert.ok(readme.includes('    ' + (await page.textContent('#command')) + '\n'), 'the README shows the command');
});

test('copies the equivalent volt new command', async () => {
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: baseUrl.slice(0, -1) });
  await page.click('#copy-command');
  await page.waitForFunction(() => document.querySelector('#copy-status').textContent === 'copied');
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  assert.equal(copied, await page.textContent('#command'));
  assert.match(copied, /^volt new \S+ --template \S+ .*--backend xla-tpu/);
});

test('the shared URL restores the same state in a new tab', async () => {
  const url = page.url();
  assert.match(url, /backend=xla-tpu/);
  const keys = await page.$$eval('.field', (rows) => rows.map((r) => r.dataset.key));
  const snapshot = async (p) => {
    const out = { template: await p.$eval('#templates input:checked', (i) => i.value),
                  tab: await p.$eval('#tabs [aria-selected="true"]', (b) => b.textContent),
                  file: await p.textContent('#preview-path'), command: await p.textContent('#command') };
    for (const k of keys) out[k] = await fieldState(p, k);
    return out;
  };
  const before = await snapshot(page);
  const other = await context.newPage();
  await other.goto(url);
  await settled(other);
  assert.deepEqual(await snapshot(other), before);
  await other.reload();
  await settled(other);
  assert.deepEqual(await snapshot(other), before);
  await other.close();
});

test('a hand-edited link with an unknown option or a bad value shows the generator messages', async () => {
  const other = await context.newPage();
  await other.goto(baseUrl + '?template=minimal&colour=red&lr=fast');
  await settled(other);
  assert.match(await other.textContent('#banner'), /colour: unknown option/);
  await other.click('#tab-Training');
  const lr = await fieldState(other, 'lr');
  assert.match(lr.error, /expects a number from 1e-08 to 10.0, got 'fast'/);
  assert.equal(await other.isDisabled('#download-notebook'), true);
  await other.close();
});

test('loggers are boxes and the profiler a list; config.yaml, README, command and notebook follow them', async () => {
  const other = await context.newPage();
  await other.goto(baseUrl + '?template=minimal#tab=Loggers&file=config.yaml');
  await settled(other);
  assert.equal(await other.isVisible('#opt-logger-csv'), true, 'the Loggers tab is open');
  assert.equal(await other.isChecked('#opt-logger-csv'), true, 'csv is the default');
  assert.equal(await other.isChecked('#opt-logger-tensorboard'), false);
  assert.deepEqual(await other.$$eval('#opt-profiler option', (o) => o.map((x) => x.value)),
                   ['none', 'simple', 'advanced', 'pytorch']);
  await other.check('#opt-logger-tensorboard');
  await settled(other);
  assert.match(await other.textContent('#preview code'), /logger: \[csv, tensorboard\]/);
  assert.equal(new URL(other.url()).searchParams.get('logger'), 'csv,tensorboard');
  assert.match(await other.textContent('#command'), /--logger csv,tensorboard/);
  await other.selectOption('#opt-profiler', 'simple');
  await settled(other);
  assert.match(await other.textContent('#preview code'), /profiler: simple/);
  assert.match(await other.textContent('#command'), /--logger csv,tensorboard --profiler simple/);
  await other.click('#tree button[data-path="README.md"]');
  const readme = await other.textContent('#preview code');
  assert.match(readme, /tensorboard --logdir lightning_logs/);
  assert.match(readme, /volt plot lightning_logs\/version_0/);
  assert.match(readme, /cat lightning_logs\/version_0\/fit-profile\.txt/);
  // The notebook opens TensorBoard on the run's logs.
  const [download] = await Promise.all([other.waitForEvent('download'), other.click('#download-notebook')]);
  const file = path.join(downloadsDir, 'loggers-' + download.suggestedFilename());
  await download.saveAs(file);
  const nb = JSON.parse(fs.readFileSync(file, 'utf8'));
  const code = nb.cells.filter((c) => c.cell_type === 'code').map((c) => c.source.join('')).join('\n');
  assert.match(code, /%load_ext tensorboard\n%tensorboard --logdir \{PROJECT\}\/lightning_logs/);
  // No box ticked: no logger.
  await other.uncheck('#opt-logger-csv');
  await settled(other);
  await other.uncheck('#opt-logger-tensorboard');
  await settled(other);
  assert.equal(new URL(other.url()).searchParams.get('logger'), 'none');
  await other.click('#tree button[data-path="config.yaml"]');
  assert.match(await other.textContent('#preview code'), /logger: false/);
  assert.match(await other.textContent('#command'), /--logger none/);
  // The link restores the boxes.
  const again = await context.newPage();
  await again.goto(other.url());
  await settled(again);
  assert.equal(await again.isChecked('#opt-logger-csv'), false);
  assert.equal(await again.isChecked('#opt-logger-tensorboard'), false);
  assert.equal((await fieldState(again, 'profiler')).value, 'simple');
  await again.close();
  await other.close();
});

test('a hand-edited link with an unknown logger or profiler shows the messages under their fields', async () => {
  const other = await context.newPage();
  await other.goto(baseUrl + '?template=minimal&logger=csv,wandb&profiler=fast#tab=Loggers');
  await settled(other);
  const logger = await other.textContent('.field[data-key="logger"] .error');
  assert.match(logger, /'wandb' is not one of: csv, tensorboard/);
  assert.equal(await other.getAttribute('#opt-logger', 'aria-invalid'), 'true');
  assert.equal(await other.isChecked('#opt-logger-csv'), true, 'the known part of the choice stays ticked');
  assert.match((await fieldState(other, 'profiler')).error, /'fast' is not one of: none, simple, advanced, pytorch/);
  assert.equal(await other.isDisabled('#download-zip'), true);
  // Ticking a box sends a valid choice, and the latest choice wins: the rejected profiler is left out (its default).
  await other.check('#opt-logger-tensorboard');
  await settled(other);
  assert.equal(await other.textContent('.field[data-key="logger"] .error'), '');
  assert.equal(await other.getAttribute('#opt-logger', 'aria-invalid'), null);
  assert.deepEqual(await fieldState(other, 'profiler'), { value: 'none', disabled: false, hidden: false, hint: '',
                                                          error: '' });
  assert.equal(new URL(other.url()).searchParams.get('logger'), 'csv,tensorboard');
  assert.equal(await other.isDisabled('#download-zip'), false);
  await other.close();
});

// The text of the preview without its line numbers.
async function previewText(p) {
  return p.$eval('#preview code', (c) => [...c.childNodes].map((n) =>
    n.nodeType === 1 && n.classList.contains('ln') ? '' : n.textContent).join(''));
}
async function renderApi(options) {
  return (await fetch(baseUrl + 'api/render', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(options),
  })).json();
}

test("the preview highlights with Debian's Prism, every language the generator writes", async () => {
  const other = await context.newPage();
  await other.goto(baseUrl + '?template=image-classification&sbatch=true');
  await settled(other);
  assert.equal(await other.evaluate(() => window.Prism.manual), true, 'Prism highlights only when asked');
  // One sample per language, through the page's own function; each must come back with the tokens named.
  const samples = {
    'src/main.cpp': ['#include <vector>\nint main() { return 0; }  // done', ['macro', 'keyword', 'number', 'comment']],
    'CMakeLists.txt': ['cmake_minimum_required(VERSION 3.18)\nset(X "${Y}")  # c', ['keyword', 'string', 'comment']],
    'config.yaml': ['trainer:\n  max_epochs: 3  # c\n  name: "x"', ['key', 'number', 'comment', 'string']],
    'run.sbatch': ['#!/bin/bash\nexport A="$HOME"  # c\nif true; then echo hi; fi', ['shebang', 'keyword', 'comment']],
    'plot.py': ['import os\ndef f(x):\n    return "s" + 1  # c', ['keyword', 'string', 'number', 'comment']],
    'x.json': ['{"a": [1, true, null, "s"]}', ['property', 'number', 'boolean', 'string']],
    'README.md': ['# Title\n\nSome `code` and **bold**.\n\n```sh\nls\n```', ['title', 'code-snippet', 'bold', 'code']],
  };
  const found = await other.evaluate((samples) => {
    const out = {};
    for (const [path, [text]] of Object.entries(samples)) {
      const code = document.createElement('code');
      code.innerHTML = window.VoltHighlight.highlight(path, text);
      const kinds = new Set();
      for (const t of code.querySelectorAll('.token')) for (const c of t.classList) kinds.add(c);
      const shown = [...code.childNodes].map((n) => n.nodeType === 1 && n.classList.contains('ln') ? '' : n.textContent);
      out[path] = { kinds: [...kinds], text: shown.join(''), lines: code.querySelectorAll('.ln').length };
    }
    return out;
  }, samples);
  for (const [path, [text, kinds]] of Object.entries(samples)) {
    for (const k of kinds) assert.ok(found[path].kinds.includes(k), `${path}: no ${k} token in ${found[path].kinds}`);
    assert.equal(found[path].text, text, `${path}: the highlighted text is the file's`);
    assert.equal(found[path].lines, text.split('\n').length, `${path}: one number per line`);
  }
  // The generated files: each shown whole, with tokens where the language is known.
  const paths = await other.$$eval('#tree button[data-path]', (bs) => bs.map((b) => b.dataset.path));
  assert.ok(paths.includes('run.sbatch') && paths.includes('CMakeLists.txt'), paths.join(' '));
  const expected = await renderApi({ template: 'image-classification', sbatch: true });
  for (const p of paths) {
    await other.click(`#tree button[data-path="${p}"]`);
    assert.equal(await previewText(other), expected.files[p], `${p}: shown whole`);
    assert.ok(await other.$('#preview .token'), `${p}: highlighted`);
    // A multi-line token is closed and opened again on each line: no line number lands inside a token.
    assert.equal(await other.$$eval('#preview code .ln', (ls) => ls.filter((l) => l.parentElement.tagName !== 'CODE').length), 0);
  }
  await other.close();
});

test('the copy button of every file puts its exact text on the clipboard', async () => {
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: baseUrl.slice(0, -1) });
  const other = await context.newPage();
  await other.goto(baseUrl + '?template=image-classification&sbatch=true&logger=csv,tensorboard');
  await settled(other);
  const expected = await renderApi({ template: 'image-classification', sbatch: true, logger: 'csv,tensorboard' });
  const paths = await other.$$eval('#tree button[data-path]', (bs) => bs.map((b) => b.dataset.path));
  assert.deepEqual([...paths].sort(), Object.keys(expected.files).sort());
  for (const p of paths) {
    await other.click(`#tree button[data-path="${p}"]`);
    await other.evaluate(() => navigator.clipboard.writeText('(not copied)'));
    await other.evaluate(() => { document.querySelector('#copy-file-status').textContent = ''; });
    await other.click('#copy-file');
    await other.waitForFunction(() => document.querySelector('#copy-file-status').textContent === 'copied');
    const copied = await other.evaluate(() => navigator.clipboard.readText());
    assert.equal(copied, expected.files[p], `${p}: the clipboard holds the file's text`);
    assert.equal(await previewText(other), copied, `${p}: the previewed file`);
  }
  await other.close();
});

test('dark mode follows the system and a toggle, kept in the URL, overrides it', async () => {
  const other = await context.newPage();
  const colours = () => other.evaluate(() => {
    const c = (sel) => { const s = getComputedStyle(document.querySelector(sel)); return [s.backgroundColor, s.color]; };
    return { body: c('body'), preview: c('#preview'), button: document.querySelector('#theme-toggle').textContent };
  });
  await other.emulateMedia({ colorScheme: 'light' });
  await other.goto(baseUrl + '?template=minimal');
  await settled(other);
  const light = await colours();
  assert.deepEqual(light.body, ['rgb(255, 255, 255)', 'rgb(29, 35, 48)']);
  assert.equal(light.button, 'Dark mode');
  await other.emulateMedia({ colorScheme: 'dark' });
  await other.waitForFunction(() => document.querySelector('#theme-toggle').textContent === 'Light mode');
  const dark = await colours();
  assert.notDeepEqual(dark.body, light.body, 'the system dark mode changes the page colours');
  assert.notDeepEqual(dark.preview, light.preview);
  assert.equal(dark.button, 'Light mode');
  // Background dark, text light: the luminance of each, from rgb().
  const luma = (rgb) => { const [r, g, b] = rgb.match(/\d+/g).map(Number); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  assert.ok(luma(dark.body[0]) < 60 && luma(dark.body[1]) > 180, JSON.stringify(dark));
  // The toggle chooses light against the system, and the URL keeps it.
  await other.click('#theme-toggle');
  assert.deepEqual((await colours()).body, light.body);
  assert.equal(new URLSearchParams(new URL(other.url()).hash.slice(1)).get('theme'), 'light');
  await other.reload();
  await settled(other);
  assert.deepEqual((await colours()).body, light.body, 'the link restores the chosen theme');
  await other.click('#theme-toggle');
  assert.deepEqual((await colours()).body, dark.body);
  assert.equal(new URLSearchParams(new URL(other.url()).hash.slice(1)).get('theme'), 'dark');
  await other.emulateMedia({ colorScheme: 'light' });
  assert.deepEqual((await colours()).body, dark.body, 'a chosen theme wins over the system');
  // The options survive the toggles.
  assert.equal(new URL(other.url()).searchParams.get('template'), 'minimal');
  await other.screenshot({ path: path.join(kArtifacts, 'ui-dark.png') });
  await other.close();
});

test('at 420 px wide the panes stack and no element overflows the viewport', async () => {
  const other = await context.newPage();
  await other.setViewportSize({ width: 420, height: 900 });
  await other.goto(baseUrl + '?template=image-classification&backend=xla-tpu#file=README.md');
  await settled(other);
  // With a message under a field, and the last valid project's README in the preview.
  await other.click('#tab-Training');
  await other.selectOption('#opt-precision', '16-mixed');
  await settled(other);
  assert.match((await fieldState(other, 'precision')).error, /16-mixed is impossible/);
  assert.equal(await other.textContent('#preview-path'), 'volt_project/README.md');
  // Elements inside a scrolling box (the preview, the tree) are clipped by it: the box itself must fit.
  const overflowing = () => other.evaluate(() => {
    const width = document.documentElement.clientWidth;
    const clipped = (e) => {
      for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
        if (getComputedStyle(a).overflowX !== 'visible') return true;
      }
      return false;
    };
    const bad = [];
    for (const e of document.querySelectorAll('body *')) {
      const r = e.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      if ((r.right > width + 0.5 || r.left < -0.5) && !clipped(e)) {
        bad.push(`${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}.${e.className} [${r.left}, ${r.right}]`);
      }
    }
    return { width, scrollWidth: document.documentElement.scrollWidth, bad: bad.slice(0, 10) };
  });
  const tabs = await other.$$eval('#tabs button', (bs) => bs.map((b) => b.id));
  for (const tab of tabs) {
    await other.click('#' + tab);
    const o = await overflowing();
    assert.equal(o.width, 420);
    assert.deepEqual(o.bad, [], `${tab}: elements past the right edge`);
    assert.ok(o.scrollWidth <= 420, `${tab}: the page scrolls sideways (${o.scrollWidth} px)`);
  }
  // Stacked: the files below the options, the preview below the tree, and the resize handles gone.
  const box = async (sel) => other.$eval(sel, (e) => e.getBoundingClientRect().toJSON());
  assert.ok((await box('#files')).top >= (await box('#settings')).bottom);
  assert.ok((await box('#preview-pane')).top >= (await box('#tree')).bottom);
  assert.equal(await other.isVisible('#resize-settings'), false);
  assert.ok((await box('#preview')).width > 300, 'the preview takes the width');
  await other.$eval('#files', (e) => e.scrollIntoView());
  await other.screenshot({ path: path.join(kArtifacts, 'ui-420.png') });
  await other.close();
});

test('the panes resize by dragging their handles (and by the arrow keys)', async () => {
  const other = await context.newPage();
  await other.goto(baseUrl + '?template=minimal');
  await settled(other);
  const width = (sel) => other.$eval(sel, (e) => e.getBoundingClientRect().width);
  const drag = async (handle, dx) => {
    const b = await other.$eval(handle, (e) => e.getBoundingClientRect().toJSON());
    const x = b.left + b.width / 2;
    const y = b.top + 200;
    await other.mouse.move(x, y);
    await other.mouse.down();
    await other.mouse.move(x + dx / 2, y, { steps: 4 });
    await other.mouse.move(x + dx, y, { steps: 4 });
    await other.mouse.up();
  };
  for (const [handle, pane, dx] of [['#resize-settings', '#settings', 150], ['#resize-settings', '#settings', -100],
                                    ['#resize-tree', '#tree', 120], ['#resize-tree', '#tree', -60]]) {
    const before = await width(pane);
    await drag(handle, dx);
    const after = await width(pane);
    assert.ok(Math.abs(after - before - dx) <= 2, `${handle} dragged by ${dx}: ${pane} went from ${before} to ${after}`);
  }
  // The files pane gives way: its width changed by the settings' change.
  const files = await width('#files');
  await drag('#resize-settings', 50);
  assert.ok(Math.abs(await width('#files') - (files - 50)) <= 2);
  const tree = await width('#tree');
  await other.focus('#resize-tree');
  await other.keyboard.press('ArrowLeft');
  assert.ok(Math.abs(await width('#tree') - (tree - 16)) <= 1);
  // A drag past the edge stops at the limit instead of hiding a pane.
  await drag('#resize-tree', -2000);
  assert.ok(await width('#tree') >= 99);
  await other.close();
});

test('the page has a favicon and links to the docs, which volt ui serves itself', async () => {
  const other = await context.newPage();
  await other.goto(baseUrl);
  await settled(other);
  const icon = await other.evaluate(async () => {
    const r = await fetch(document.querySelector('link[rel="icon"]').href);
    return { status: r.status, type: r.headers.get('Content-Type'), url: r.url };
  });
  assert.deepEqual(icon, { status: 200, type: 'image/svg+xml', url: baseUrl + 'assets/favicon.svg' });
  assert.equal((await fetch(baseUrl + 'favicon.ico')).status, 200);
  const links = await other.$$eval('#help a', (as) => as.map((a) => ({ text: a.textContent, href: a.href })));
  assert.deepEqual(links.map((l) => l.href), [baseUrl + 'docs/generator.md', baseUrl + 'docs/ui.md']);
  assert.match(links[0].text, /docs\/generator\.md/);
  assert.match(links[1].text, /docs\/ui\.md/);
  const [popup] = await Promise.all([context.waitForEvent('page'), other.click('#help a[href="/docs/generator.md"]')]);
  await popup.waitForLoadState();
  assert.equal(popup.url(), baseUrl + 'docs/generator.md');
  const source = fs.readFileSync(new URL('../../../docs/generator.md', import.meta.url), 'utf8');
  assert.equal(await (await fetch(popup.url())).text(), source);
  const shown = await popup.evaluate(() => document.body.innerText);
  assert.ok(shown.startsWith(source.split('\n')[0]), 'the browser shows the text: ' + shown.slice(0, 80));
  await popup.close();
  await other.close();
});

test('long lines in the preview wrap with a toggle kept in the URL', async () => {
  const other = await context.newPage();
  await other.setViewportSize({ width: 1100, height: 800 });
  const expected = await renderApi({ template: 'image-classification' });
  const longest = Object.keys(expected.files).sort((a, b) =>
    Math.max(...expected.files[b].split('\n').map((l) => l.length)) -
    Math.max(...expected.files[a].split('\n').map((l) => l.length)))[0];
  await other.goto(baseUrl + '?template=image-classification#file=' + encodeURIComponent(longest));
  await settled(other);
  const scroll = () => other.$eval('#preview', (e) => ({ scroll: e.scrollWidth, client: e.clientWidth }));
  const unwrapped = await scroll();
  assert.ok(unwrapped.scroll > unwrapped.client + 50, `${longest} has lines wider than the preview: ` +
            JSON.stringify(unwrapped));
  await other.check('#wrap-lines');
  const wrapped = await scroll();
  assert.ok(wrapped.scroll <= wrapped.client, 'wrapped: ' + JSON.stringify(wrapped));
  assert.equal(await previewText(other), expected.files[longest], 'wrapping changes only the look');
  assert.equal(new URLSearchParams(new URL(other.url()).hash.slice(1)).get('wrap'), '1');
  await other.reload();
  await settled(other);
  assert.equal(await other.isChecked('#wrap-lines'), true);
  assert.ok((await scroll()).scroll <= (await scroll()).client);
  await other.uncheck('#wrap-lines');
  assert.deepEqual(await scroll(), unwrapped);
  await other.close();
});

test('a screenshot of the page is saved as a test artifact', async () => {
  const shot = path.join(kArtifacts, 'ui.png');
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: shot });
  assert.ok(fs.statSync(shot).size > 20000, 'the screenshot has content');
  if (process.env.VOLT_UI_SCREENSHOT) fs.copyFileSync(shot, process.env.VOLT_UI_SCREENSHOT);
});

test('the page loaded nothing from elsewhere and the server wrote nothing', async () => {
  assert.deepEqual(foreignRequests, []);
  // Normal use, refused combinations and hand-edited links included: no console error, no failed request
  // (no 404 for a favicon, no 400 for a refused choice).
  assert.deepEqual(consoleErrors, []);
  assert.deepEqual(failedRequests, []);
  assert.deepEqual(fs.readdirSync(serverCwd), []);
});

test('volt ui stops cleanly on SIGTERM, while the browser still holds connections', async () => {
  const start = Date.now();
  const code = await new Promise((resolve) => { server.on('exit', resolve); server.kill('SIGTERM'); });
  assert.equal(code, 0);
  assert.ok(Date.now() - start < 3000, `stopping took ${Date.now() - start} ms`);
});

test('volt ui on another address than loopback warns, and rejects a bad port', async () => {
  const other = spawn(kVolt, ['ui', '--host', '0.0.0.0', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => other.on('exit', resolve));
  try {
    // stdout and stderr are two pipes: the warning (written first) may arrive after the URL.
    const warning = /warning: listening on 0\.0\.0\.0, so every machine that can reach it can use this page/;
    const url = /serving the generator at http:\/\/0\.0\.0\.0:\d+\//;
    let out = '';
    let err = '';
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no URL and warning in 10 s: ' + out + err)), 10000);
      const check = () => { if (url.test(out) && warning.test(err)) { clearTimeout(timer); resolve(); } };
      other.stdout.on('data', (d) => { out += d; check(); });
      other.stderr.on('data', (d) => { err += d; check(); });
    });
    other.kill('SIGINT');
    assert.equal(await exited, 0);
  } finally {
    other.kill('SIGKILL');  // a failed check must not leave the server holding the test run open
  }
  const bad = spawn(kVolt, ['ui', '--port', 'eighty'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let badErr = '';
  bad.stderr.on('data', (d) => { badErr += d; });
  assert.equal(await new Promise((resolve) => bad.on('exit', resolve)), 2);
  assert.match(badErr, /--port 'eighty' is not a TCP port: it is not a whole number/);
});
