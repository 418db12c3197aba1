// End-to-end test of the web panel: a real `sandboxd serve` on loopback, driven through the
// panel in Debian's headless Chromium by playwright-core. Run by scripts/test.sh
// (`npm ci && node panel.test.mjs`); SANDBOXD overrides the binary's path.
//
// Without /usr/bin/chromium the test is skipped, except under CI=true where it fails.

import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";

import { createHash } from "node:crypto";

import { chromium } from "playwright-core";
import { PNG } from "pngjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../../../..");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const SANDBOXD = process.env.SANDBOXD || path.join(root, "target/debug/sandboxd");
const WAIT = 60_000;

function log(...a) {
  console.log("[panel]", ...a);
}

if (!existsSync(CHROMIUM)) {
  if (process.env.CI === "true") {
    console.error(`[panel] FAIL: ${CHROMIUM} is missing (CI=true: the panel test may not be skipped)`);
    process.exit(1);
  }
  log(`SKIP: ${CHROMIUM} is missing (install Debian's chromium package)`);
  process.exit(0);
}
assert.ok(existsSync(SANDBOXD), `${SANDBOXD} is missing: build it with cargo build -p sandboxd`);

const work = mkdtempSync(path.join(tmpdir(), "wasmsand-panel-"));
const servers = [];
let serverLog = "";
let context;

async function startServer(name, env) {
  const dataDir = path.join(work, name);
  mkdirSync(dataDir);
  const server = spawn(SANDBOXD, ["serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--store", "memory"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...(env || {}) },
  });
  servers.push(server);
  // The server's JSON logs are shown only when the test fails.
  server.stderr.on("data", (d) => { serverLog += d; });
  return await new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`sandboxd did not start: ${out}`)), WAIT);
    server.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/[0-9.:]+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    server.on("exit", (code) => reject(new Error(`sandboxd exited (${code}): ${out}`)));
  });
}

async function cleanup() {
  if (context) await context.close().catch(() => {});
  for (const server of servers) {
    if (server.exitCode !== null) continue;
    server.kill("SIGTERM");
    await new Promise((r) => {
      const t = setTimeout(() => { server.kill("SIGKILL"); r(); }, 10_000);
      server.on("exit", () => { clearTimeout(t); r(); });
    });
  }
  rmSync(work, { recursive: true, force: true });
}

/// Decodes the PNG and tells how many distinct colors it has and which share of its pixels
/// is not (near) white: a blank or failed render has one or two colors.
function pngStats(buf) {
  const png = PNG.sync.read(buf);
  const colors = new Set();
  let nonWhite = 0;
  const px = png.width * png.height;
  for (let i = 0; i < png.data.length; i += 4) {
    const [r, g, b] = [png.data[i], png.data[i + 1], png.data[i + 2]];
    colors.add((r << 16) | (g << 8) | b);
    if (r < 235 || g < 235 || b < 235) nonWhite += 1;
  }
  return { width: png.width, height: png.height, colors: colors.size, nonWhiteShare: nonWhite / px };
}

async function main() {
  const t0 = Date.now();
  const base = await startServer("open");
  log(`sandboxd at ${base}`);
  const userDataDir = path.join(work, "chromium-profile");
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport: { width: 1280, height: 1000 },
    acceptDownloads: true,
  });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base });
  // Nothing but the server under test: a request elsewhere (a CDN, a font) fails the test.
  const foreign = [];
  const allowed = new Set([base]);
  await context.route("**/*", (route) => {
    const u = new URL(route.request().url());
    if (!allowed.has(u.origin) && u.protocol !== "data:" && u.protocol !== "blob:") {
      foreign.push(u.href);
      return route.abort();
    }
    return route.continue();
  });
  const page = context.pages()[0] || (await context.newPage());
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  // Every WebSocket the page opens, and the seqs it received, to check reconnects.
  const sockets = [];
  page.on("websocket", (ws) => {
    const s = { url: ws.url(), seqs: [] };
    sockets.push(s);
    ws.on("framereceived", (f) => {
      try {
        const v = JSON.parse(f.payload);
        if (typeof v.seq === "number") s.seqs.push(v.seq);
      } catch {}
    });
  });

  await page.goto(base + "/");
  await page.waitForSelector("body[data-ready='1']", { timeout: WAIT });
  await page.waitForFunction(() => /runtime wasm/.test(document.getElementById("server-info").textContent), null, { timeout: WAIT });
  // The one-shot image field offers every image of the available runtimes.
  const offered = await page.$$eval("#images option", (os) => os.map((o) => o.value));
  assert.ok(offered.includes("wasmsand/default"), `images offered: ${offered}`);

  // ---- a session and an upload ----
  await page.click("#session-new");
  await page.waitForFunction(() => /session_id/.test(document.getElementById("session-info").textContent), null, { timeout: WAIT });
  const sessionId = await page.$eval("#session-select", (s) => s.value);
  assert.match(sessionId, /\S+/, "the new session is selected");
  const uploaded = "uploaded through the panel\nsecond line\n";
  await page.setInputFiles("#upload-input", { name: "data.txt", mimeType: "text/plain", buffer: Buffer.from(uploaded) });
  await page.click("#upload-btn");
  await page.waitForFunction(() => /uploaded 1 file/.test(document.getElementById("upload-result").textContent), null, { timeout: WAIT });
  log(`session ${sessionId}, upload ok`);

  // ---- a run that prints over time ----
  const N = 12;
  const script = [
    "cat data.txt",
    `for i in ${Array.from({ length: N }, (_, i) => i + 1).join(" ")}; do echo "tick $i"; sleep 0.25; done`,
    "echo 'to stderr' >&2",
    "mkdir -p out && cp data.txt out/copy.txt",
    "exit 3",
  ].join("\n");
  await page.fill("#command", script);
  await page.fill("#capture", "out/**");
  await page.click("#run-btn");
  await page.waitForFunction(() => /tick 3\n/.test(document.getElementById("console").textContent), null, { timeout: WAIT });
  const early = await page.evaluate(() => ({
    text: document.getElementById("console").textContent,
    phase: document.getElementById("phase").textContent,
    runId: document.getElementById("run-id").textContent,
  }));
  // Live: lines are on screen while the run is still going.
  assert.equal(early.phase, "running", "the phase shows running while lines arrive");
  assert.ok(!early.text.includes(`tick ${N}\n`), "the first lines arrived before the last was printed");
  log(`live lines seen while running (run ${early.runId})`);

  // Force a reconnect in the middle of the run.
  await page.click("#reconnect-btn");
  await page.waitForFunction(() => document.getElementById("reconnects").textContent === "1", null, { timeout: WAIT });
  await page.waitForSelector("body[data-run-done]", { timeout: WAIT });
  const done = await page.evaluate(() => ({
    text: document.getElementById("console").textContent,
    phase: document.getElementById("phase").textContent,
    exit: document.getElementById("exit-code").textContent,
    usage: document.getElementById("usage").textContent,
    lastSeq: Number(document.getElementById("last-seq").textContent),
  }));
  const ticks = done.text.split("\n").filter((l) => l.startsWith("tick "));
  assert.deepEqual(ticks, Array.from({ length: N }, (_, i) => `tick ${i + 1}`), "every line once, in order");
  assert.equal(done.text.split(uploaded).length, 2, "the uploaded file was printed exactly once");
  const errSpans = await page.$$eval("#console span.err", (s) => s.map((x) => x.textContent).join(""));
  assert.equal(errSpans, "to stderr\n", "stderr is shown as stderr");
  // A nonzero exit ends the run `failed` with reason nonzero_exit.
  assert.equal(done.phase, "failed");
  assert.equal(done.exit, "3");
  assert.match(done.usage, /nonzero_exit/);
  assert.match(done.usage, /wall time\s*[0-9.]+ s/);
  assert.match(done.usage, /log bytes/);
  assert.match(done.usage, /artifact bytes/);

  // The stream was really resumed: a second socket that asked for the next seq, and the
  // seqs rendered are exactly the run's, none twice.
  const runSockets = sockets.filter((s) => s.url.includes(`/runs/${early.runId}/stream`));
  assert.ok(runSockets.length >= 2, `a second WebSocket after the reconnect (${runSockets.length})`);
  const resumeFrom = Number(new URL(runSockets[1].url).searchParams.get("from_seq"));
  assert.ok(resumeFrom > 1, `the reconnect resumed from seq ${resumeFrom}`);
  const status = await (await fetch(`${base}/api/v1/sandbox/runs/${early.runId}`)).json();
  assert.equal(done.lastSeq, status.last_seq, "the panel saw every frame up to the run's last");
  assert.equal(status.exit_code, 3);
  log(`reconnected once, resumed from seq ${resumeFrom}; ${ticks.length} lines in order, exit 3`);

  // ---- the PRD's deep link to a run: its whole log again, its status ----
  const linked = await context.newPage();
  linked.on("pageerror", (e) => pageErrors.push(String(e)));
  await linked.goto(`${base}/webui/sandbox/runs/${early.runId}`);
  await linked.waitForSelector("body[data-run-done]", { timeout: WAIT });
  const again = await linked.evaluate(() => ({
    text: document.getElementById("console").textContent,
    phase: document.getElementById("phase").textContent,
    exit: document.getElementById("exit-code").textContent,
  }));
  assert.deepEqual(again.text.split("\n").filter((l) => l.startsWith("tick ")), ticks);
  assert.equal(again.phase, "failed");
  assert.equal(again.exit, "3");
  await linked.close();
  log("deep link /webui/sandbox/runs/{id} shows the whole run");

  // ---- artifacts ----
  await page.waitForSelector("#artifacts button[data-path='out/copy.txt']", { timeout: WAIT });
  const [download] = await Promise.all([
    page.waitForEvent("download", { timeout: WAIT }),
    page.click("#artifacts button[data-path='out/copy.txt']"),
  ]);
  const saved = path.join(work, "copy.txt");
  await download.saveAs(saved);
  assert.equal(readFileSync(saved, "utf8"), uploaded, "the downloaded artifact is the uploaded file");
  assert.equal(download.suggestedFilename(), "copy.txt");
  log("artifact downloaded");

  // ---- the run spec ----
  await page.click("#copy-spec-btn");
  await page.waitForFunction(() => /copied/.test(document.getElementById("copy-note").textContent), null, { timeout: WAIT });
  const copied = JSON.parse(await page.evaluate(() => navigator.clipboard.readText()));
  assert.equal(copied.spec_version, "1.0");
  assert.equal(copied.policy_hash, status.policy_hash);
  assert.match(copied.policy_hash, /\S{16,}/);
  assert.equal(copied.run_id, early.runId);
  assert.deepEqual(copied.command, ["bash", "-c", script]);
  assert.equal(copied.image_digest, status.image_digest);
  log("run spec copied");

  // ---- a screenshot that is not blank ----
  const shot = await page.screenshot({ fullPage: true });
  const shotPath = path.join(root, "target", "panel-screenshot.png");
  mkdirSync(path.dirname(shotPath), { recursive: true });
  writeFileSync(shotPath, shot);
  const st = pngStats(shot);
  log(`screenshot ${st.width}x${st.height}: ${st.colors} colors, ${(st.nonWhiteShare * 100).toFixed(1)}% not white (${shotPath})`);
  assert.ok(st.colors >= 32, `the screenshot has ${st.colors} colors: blank?`);
  assert.ok(st.nonWhiteShare > 0.05, "the screenshot is mostly white: blank?");

  // ---- cancel a long run ----
  await page.fill("#command", "echo started; sleep 60; echo never");
  await page.fill("#capture", "");
  await page.click("#run-btn");
  await page.waitForFunction(() => /started\n/.test(document.getElementById("console").textContent), null, { timeout: WAIT });
  await page.waitForFunction(() => !document.getElementById("cancel-btn").disabled, null, { timeout: WAIT });
  await page.click("#cancel-btn");
  await page.waitForSelector("body[data-run-done]", { timeout: WAIT });
  const killed = await page.evaluate(() => ({
    phase: document.getElementById("phase").textContent,
    text: document.getElementById("console").textContent,
  }));
  assert.equal(killed.phase, "killed");
  assert.ok(!killed.text.includes("never"));
  log("long run cancelled: killed");

  // ---- the session is still there after a reload, from the browser's list ----
  await page.reload();
  await page.waitForSelector("body[data-ready='1']");
  const options = await page.$$eval("#session-select option", (o) => o.map((x) => x.value));
  assert.ok(options.includes(sessionId), "the session is offered after a reload");

  // ---- with authentication on: the key goes in the panel, the stream takes the signed URL ----
  const key = "panel-test-key-0123456789";
  const authed = await startServer("authed", {
    SANDBOX_API_KEYS: `${createHash("sha256").update(key).digest("hex")} alice`,
    SANDBOX_WS_SIGNED_URLS: "true",
    SANDBOX_WS_SIGNING_SECRET: "panel-test-signing-secret",
  });
  allowed.add(authed);
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: authed });
  const page2 = await context.newPage();
  page2.on("pageerror", (e) => pageErrors.push(String(e)));
  await page2.goto(authed + "/");
  await page2.waitForFunction(() => /401/.test(document.getElementById("server-info").textContent), null, { timeout: WAIT });
  await page2.fill("#api-key", key);
  await page2.click("#auth-form button");
  await page2.waitForFunction(() => /runtime wasm/.test(document.getElementById("server-info").textContent), null, { timeout: WAIT });
  await page2.click("#session-new");
  await page2.waitForFunction(() => /session_id/.test(document.getElementById("session-info").textContent), null, { timeout: WAIT });
  await page2.fill("#command", "for i in 1 2 3; do echo \"authed $i\"; sleep 0.2; done; mkdir -p out; echo secret > out/s.txt");
  await page2.fill("#capture", "out/**");
  await page2.click("#run-btn");
  await page2.waitForFunction(() => /authed 1\n/.test(document.getElementById("console").textContent), null, { timeout: WAIT });
  await page2.click("#reconnect-btn");
  await page2.waitForSelector("body[data-run-done]", { timeout: WAIT });
  const a = await page2.evaluate(() => ({
    text: document.getElementById("console").textContent,
    phase: document.getElementById("phase").textContent,
    reconnects: document.getElementById("reconnects").textContent,
  }));
  assert.deepEqual(a.text.split("\n").filter((l) => l.startsWith("authed ")), ["authed 1", "authed 2", "authed 3"]);
  assert.equal(a.phase, "completed");
  assert.equal(a.reconnects, "1");
  const [dl] = await Promise.all([
    page2.waitForEvent("download", { timeout: WAIT }),
    page2.click("#artifacts button[data-path='out/s.txt']"),
  ]);
  const saved2 = path.join(work, "s.txt");
  await dl.saveAs(saved2);
  assert.equal(readFileSync(saved2, "utf8"), "secret\n");
  // The same API without the key is refused: the panel really sent it.
  assert.equal((await fetch(`${authed}/api/v1/sandbox/runtimes`)).status, 401);
  log("with an API key and signed stream URLs: run streamed, resumed, artifact downloaded");

  assert.deepEqual(foreign, [], "the panel loads nothing from elsewhere");
  assert.deepEqual(pageErrors, [], "no script errors");
  log(`ok in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

try {
  await main();
  await cleanup();
} catch (e) {
  console.error("[panel] FAIL:", e);
  console.error("[panel] server log (last 8 KiB):\n" + serverLog.slice(-8192));
  await cleanup();
  process.exit(1);
}
