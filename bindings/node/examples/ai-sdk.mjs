// @ts-check
// An AI SDK agent whose tools run in a wasmsand sandbox (docs/integrations.md, "Vercel AI
// SDK"). With OPENAI_API_KEY set it asks OpenAI's model (`npm install @ai-sdk/openai`);
// without it a scripted model plays the agent's part, so the example runs offline (and is run
// so by test/ai-sdk).
//
//   npm install wasmsand ai
//   node ai-sdk.mjs
import { generateText, isStepCount } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { WasmsandSandboxSession, createWasmsandTools } from 'wasmsand/ai';

// A sandbox of the session's own, ended by `close()`; `new WasmsandSandboxSession(sb)` would
// wrap one of the caller's instead.
const session = await WasmsandSandboxSession.create({ timeoutMs: 30_000 });
try {
  await session.writeTextFile({ path: 'data.csv', content: 'city,temp\nParis,12\nTokyo,18\nReykjavik,3\n' });
  const result = await generateText({
    model: await chooseModel(),
    // The tools find the sandbox in `experimental_sandbox`; `createWasmsandTools({ sandbox })`
    // binds them to one instead.
    tools: createWasmsandTools(),
    experimental_sandbox: session,
    // The SDK does not put the sandbox's description in the prompt itself.
    instructions: `Answer with the help of the sandbox.\n${session.description}`,
    prompt: 'What is the mean temperature in data.csv?',
    stopWhen: isStepCount(5),
  });
  for (const step of result.steps) {
    for (const r of step.toolResults) console.log(`[${r.toolName}] ${String(r.output)}`);
  }
  console.log(result.text);
} finally {
  await session.close();
}

async function chooseModel() {
  if (process.env.OPENAI_API_KEY) {
    // Named through a variable so that the example type-checks without the package.
    const provider = '@ai-sdk/openai';
    const { openai } = await import(provider);
    return openai('gpt-5-mini');
  }
  return scriptedModel();
}

/** What a model would do here: look at the file, compute, then answer from what the
 * computation printed (the last tool result in the prompt). */
function scriptedModel() {
  const usage = {
    inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 0, text: 0, reasoning: 0 },
  };
  /** @typedef {Awaited<ReturnType<MockLanguageModelV4['doGenerate']>>} Turn */
  /** @param {string} toolName @param {object} input @returns {Turn} */
  const call = (toolName, input) => ({
    content: [{ type: 'tool-call', toolCallId: `call-${toolName}`, toolName, input: JSON.stringify(input) }],
    finishReason: { unified: 'tool-calls', raw: undefined },
    usage,
    warnings: [],
  });
  const turns = [
    call('run_shell', { command: 'head -n 3 data.csv; wc -l data.csv' }),
    call('run_python', {
      code: 'import pandas as pd\nprint(round(pd.read_csv("data.csv")["temp"].mean(), 2))',
    }),
  ];
  return new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => {
      const turn = turns.shift();
      if (turn) return turn;
      const last = prompt.at(-1);
      const reply = last?.role === 'tool' && last.content[0]?.type === 'tool-result' ? last.content[0].output : null;
      const printed = reply?.type === 'text' ? /--- stdout ---\n(.*)/.exec(reply.value)?.[1] : undefined;
      return {
        content: [{ type: 'text', text: `The mean temperature in data.csv is ${printed ?? 'unknown'}.` }],
        finishReason: { unified: 'stop', raw: undefined },
        usage,
        warnings: [],
      };
    },
  });
}
