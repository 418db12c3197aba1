// A program over the whole API, type-checked with `tsc --strict` (npm run typecheck, the node
// stage of scripts/test.sh) and run by test/sample.test.js, so the types and the code agree.
import {
  CommandExitError,
  CommandHandle,
  CommandResult,
  FileSystemError,
  MergeConflictError,
  Sandbox,
  SandboxError,
  WaitTimeoutError,
} from 'wasmsand';

export async function main(transport: 'inprocess' | 'rpc' | 'service' = 'inprocess'): Promise<string[]> {
  const log: string[] = [];
  const sb = await Sandbox.create({
    transport,
    timeoutMs: 10_000,
    limits: transport === 'service' ? {} : { stdoutBytes: 1 << 20, backgroundProcesses: 4 },
  });
  try {
    const r: CommandResult = await sb.commands.run('echo hello | tr a-z A-Z', {
      envs: { GREETING: 'hi' },
      cwd: '/tmp',
      onStdout: (chunk: string) => log.push(`chunk ${chunk.trim()}`),
    });
    log.push(`exit ${r.exitCode} ${r.stdout.trim()} receipt=${typeof r.usage.processes}`);

    await sb.files.write('/tmp/data.bin', new Uint8Array([1, 2, 3]));
    const bytes: Uint8Array = await sb.files.read('/tmp/data.bin');
    const text: string = await sb.files.read('/tmp/data.bin', { format: 'text' });
    log.push(`bytes ${bytes.length} text ${text.length}`);
    for await (const chunk of await sb.files.read('/tmp/data.bin', { format: 'stream' })) {
      log.push(`stream ${chunk.byteLength}`);
    }

    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    try {
      await sb.commands.run('sleep 5', { signal: controller.signal });
    } catch (e) {
      log.push(`aborted ${(e as Error).name}`);
    }

    const handle: CommandHandle = await sb.commands.run('read x; echo got $x', { background: true });
    await handle.sendStdin('it\n');
    await handle.closeStdin();
    const done = await handle.wait({ timeoutMs: 5_000 });
    log.push(`background ${handle.pid > 0} ${done.stdout.trim()}`);

    try {
      await sb.commands.run('exit 3', { check: true });
    } catch (e) {
      if (e instanceof CommandExitError) log.push(`check ${e.exitCode}`);
    }
    try {
      await sb.files.read('/nope');
    } catch (e) {
      if (e instanceof FileSystemError) log.push(`fs ${e.code}`);
      else if (e instanceof SandboxError) log.push(`other ${e.kind}`);
    }

    const snap: string = await sb.snapshot();
    await sb.commands.run('echo changed > /tmp/f');
    await sb.restore(snap);

    const fork: Sandbox = await sb.fork();
    await fork.commands.run('echo from-fork > /tmp/g');
    const merged = await sb.merge(fork);
    log.push(`merged ${Object.keys(merged.applied).join(',')}`);
    await fork.destroy();

    if (transport !== 'service') {
      const blob: Uint8Array = await sb.exportState();
      const copy = await Sandbox.importState(blob, { transport });
      log.push(`imported ${(await copy.files.read('/tmp/g', { format: 'text' })).trim()}`);
      await copy.kill();
    }
    void WaitTimeoutError;
    void MergeConflictError;
  } finally {
    await sb.kill();
  }
  return log;
}
