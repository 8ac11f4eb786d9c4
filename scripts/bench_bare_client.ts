/**
 * The benchmark's baseline: a bare ACP client written by hand. It spawns the
 * agent, sends `initialize`, `session/new` and one `session/prompt`, parses
 * each line the agent writes once, and prints the message text (stdout
 * written in 64 KiB blocks). Whatever the runner does on top of this is its
 * overhead.
 *
 * ```sh
 * deno run -A scripts/bench_bare_client.ts deno run scripts/bench_agent.ts --chunks 1000
 * ```
 *
 * @module
 */

const encoder = new TextEncoder();
const [command, ...args] = Deno.args;
const child = new Deno.Command(command, {
  args,
  stdin: "piped",
  stdout: "piped",
  stderr: "inherit",
}).spawn();
const agentIn = child.stdin.getWriter();
let nextId = 0;
const waiting = new Map<number, (result: Record<string, unknown>) => void>();

function request(
  method: string,
  params: unknown,
): Promise<Record<string, unknown>> {
  const id = ++nextId;
  agentIn.write(
    encoder.encode(
      JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n",
    ),
  );
  return new Promise((resolve) => waiting.set(id, resolve));
}

let output = "";
function print(text: string) {
  output += text;
  if (output.length >= 64 * 1024) flush();
}
function flush() {
  const bytes = encoder.encode(output);
  output = "";
  let written = 0;
  while (written < bytes.length) {
    written += Deno.stdout.writeSync(bytes.subarray(written));
  }
}

async function readAgent() {
  let buffered = "";
  for await (
    const text of child.stdout.pipeThrough(new TextDecoderStream())
  ) {
    buffered += text;
    let start = 0;
    let end: number;
    while ((end = buffered.indexOf("\n", start)) >= 0) {
      const message = JSON.parse(buffered.slice(start, end));
      start = end + 1;
      if (message.method === "session/update") {
        const update = message.params.update;
        if (update.sessionUpdate === "agent_message_chunk") {
          print(update.content.text);
        }
      } else if (message.id !== undefined) {
        waiting.get(message.id)?.(message.result);
        waiting.delete(message.id);
      }
    }
    buffered = buffered.slice(start);
  }
}

const reading = readAgent();
await request("initialize", { protocolVersion: 1, clientCapabilities: {} });
const session = await request("session/new", {
  cwd: Deno.cwd(),
  mcpServers: [],
});
await request("session/prompt", {
  sessionId: session.sessionId,
  prompt: [{ type: "text", text: "bench" }],
});
print("\n");
flush();
await agentIn.close();
child.kill("SIGTERM");
await child.status;
await reading.catch(() => {});
