// The VS Code side of "Run in Sandbox": starts `sandboxd lsp` through vscode-languageclient
// (which also registers the server's `tldw.sandbox.*` commands, so its code lenses work), and
// adds what an editor shows: the live log in an output channel, the last run's phase in the
// status bar, and an artifacts tree.
import * as path from 'path';
import * as vscode from 'vscode';
import {
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
} from 'vscode-languageclient/node';
import {
  Artifact,
  ArtifactNode,
  RunFinished,
  RunSpec,
  artifactTree,
  finishedLine,
  humanSize,
  parseCommandLine,
  specForFile,
  statusOf,
} from './logic';

let client: LanguageClient | undefined;

class ArtifactsView implements vscode.TreeDataProvider<ArtifactNode> {
  private nodes: ArtifactNode[] = [];
  private changed = new vscode.EventEmitter<ArtifactNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;

  set(items: Artifact[]) {
    this.nodes = artifactTree(items);
    this.changed.fire(undefined);
  }

  getTreeItem(n: ArtifactNode): vscode.TreeItem {
    const dir = n.children.length > 0;
    const item = new vscode.TreeItem(
      n.label,
      dir ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None,
    );
    item.description = dir ? undefined : humanSize(n.size);
    item.tooltip = n.path;
    if (!dir && n.url) {
      item.command = { command: 'tldwSandbox.openArtifact', title: 'Open Artifact', arguments: [n.url] };
    }
    return item;
  }

  getChildren(n?: ArtifactNode): ArtifactNode[] {
    return n ? n.children : this.nodes;
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel('Sandbox Runs');
  const status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 10);
  const artifacts = new ArtifactsView();
  status.text = statusOf(undefined).text;
  status.command = 'tldwSandbox.openArtifacts';
  status.show();

  const execute = async (command: string, arg?: object): Promise<any> => {
    if (!client) throw new Error('the sandbox language server is not running');
    return client.sendRequest(ExecuteCommandRequest.type, {
      command,
      arguments: arg === undefined ? [] : [arg],
    });
  };
  const showArtifacts = async (runId?: string) => {
    const answer = await execute('tldw.sandbox.openArtifacts', runId ? { run_id: runId } : undefined);
    artifacts.set(answer.items ?? []);
    return answer;
  };
  const run = async (spec?: RunSpec) => {
    try {
      const started = await execute('tldw.sandbox.run', spec);
      output.appendLine(`[${started.run_id}] ${spec?.command?.join(' ') ?? '(last run)'}: ${started.status}`);
      const s = statusOf(started.status);
      status.text = s.text;
      output.show(true);
    } catch (e: any) {
      vscode.window.showErrorMessage(`Run in Sandbox: ${e?.message ?? e}`);
    }
  };

  context.subscriptions.push(
    output,
    status,
    vscode.window.registerTreeDataProvider('tldwSandbox.artifacts', artifacts),
    vscode.commands.registerCommand('tldwSandbox.runFile', async () => {
      const editor = vscode.window.activeTextEditor;
      const folder = editor && vscode.workspace.getWorkspaceFolder(editor.document.uri);
      if (!editor || !folder) {
        return vscode.window.showWarningMessage('Run in Sandbox: open a file of the workspace first.');
      }
      await editor.document.save();
      const rel = path.relative(folder.uri.fsPath, editor.document.uri.fsPath);
      const conf = await execute('tldw.sandbox.configure');
      const spec = specForFile(rel, editor.document.languageId, Boolean(conf?.defaults?.base_image));
      if (!spec) {
        return vscode.commands.executeCommand('tldwSandbox.runCommand');
      }
      await run(spec);
    }),
    vscode.commands.registerCommand('tldwSandbox.rerun', () => run(undefined)),
    vscode.commands.registerCommand('tldwSandbox.runCommand', async () => {
      const line = await vscode.window.showInputBox({ prompt: 'Command to run in the sandbox (the workspace is its working directory)' });
      if (!line) return;
      try {
        await run({ command: parseCommandLine(line) });
      } catch (e: any) {
        vscode.window.showErrorMessage(`Run in Sandbox: ${e?.message ?? e}`);
      }
    }),
    vscode.commands.registerCommand('tldwSandbox.configure', async () => {
      const current = await execute('tldw.sandbox.configure');
      const text = await vscode.window.showInputBox({
        prompt: 'Workspace defaults as JSON (runtime, base_image, timeout_sec, env, capture_patterns, include, exclude, max_file_bytes)',
        value: JSON.stringify(current.defaults ?? {}),
      });
      if (text === undefined) return;
      try {
        await execute('tldw.sandbox.configure', JSON.parse(text));
      } catch (e: any) {
        vscode.window.showErrorMessage(`Sandbox defaults: ${e?.message ?? e}`);
      }
    }),
    vscode.commands.registerCommand('tldwSandbox.openArtifacts', async () => {
      try {
        await showArtifacts();
        await vscode.commands.executeCommand('tldwSandbox.artifacts.focus');
      } catch (e: any) {
        vscode.window.showErrorMessage(`Sandbox artifacts: ${e?.message ?? e}`);
      }
    }),
    vscode.commands.registerCommand('tldwSandbox.cancel', () => execute('tldw.sandbox.cancel')),
    vscode.commands.registerCommand('tldwSandbox.openArtifact', (url: string) => vscode.env.openExternal(vscode.Uri.parse(url))),
  );

  // The client and its notifications; made again when a setting of the server changes.
  const startClient = async () => {
    const config = vscode.workspace.getConfiguration('tldw.sandbox');
    const serverOptions: ServerOptions = {
      command: config.get<string>('sandboxdPath') || 'sandboxd',
      args: ['lsp'],
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file' }],
      outputChannelName: 'Sandbox Language Server',
      initializationOptions: {
        serverUrl: config.get<string>('serverUrl') || undefined,
        apiKey: config.get<string>('apiKey') || undefined,
        tldwNotifications: true,
      },
    };
    const c = new LanguageClient('tldwSandbox', 'Sandbox', serverOptions, clientOptions);
    await c.start();
    c.onNotification('tldw/sandbox/log', (p: { run_id: string; stream: string; text: string }) => {
      output.append(p.text);
    });
    c.onNotification('tldw/sandbox/runFinished', async (f: RunFinished) => {
      output.appendLine('');
      output.appendLine(finishedLine(f));
      const s = statusOf(f.phase, f.exit_code);
      status.text = s.text;
      status.backgroundColor = s.failed ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
      try {
        await showArtifacts(f.run_id);
      } catch {
        artifacts.set([]);
      }
    });
    client = c;
  };

  await startClient();
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (!e.affectsConfiguration('tldw.sandbox')) return;
      const old = client;
      client = undefined;
      await old?.stop();
      try {
        await startClient();
      } catch (err: any) {
        vscode.window.showErrorMessage(`Sandbox: the language server did not start: ${err?.message ?? err}`);
      }
    }),
  );
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
