// What the @google/genai JS SDK (the copy bundled in Gemini CLI) does on each ending of a Gemini
// stream: throws (which error) or ends silently. A manual check, not part of the pytest suite (CI has
// no node); tests/proxy/test_proxy_gemini.py keeps a line-by-line transcription of the SDK's stream loop.
//
// The CLI bundle does not export the SDK, so a module hook appends one export line to the bundle's
// chunk as Node loads it (the file on disk is not touched; its relative imports still resolve).
//
//   sseguard chaos --listen 127.0.0.1:9000 &
//   sseguard proxy --upstream http://127.0.0.1:9000/v1 --listen 127.0.0.1:8080 --retry 0 &
//   node interop/gemini_js_guard.mjs --base http://127.0.0.1:8080 \
//       --bundle /work/agents-npm/gemini/node_modules/@google/gemini-cli/bundle
//
// Prints one JSON line per fault: {"fault", "outcome": "silent" | "threw", "error", "message", "text"}.
import { readdirSync, readFileSync } from "node:fs";
import { register } from "node:module";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";

const { values } = parseArgs({
  options: {
    base: { type: "string", default: "http://127.0.0.1:8080" },
    bundle: { type: "string",
              default: "/work/agents-npm/gemini/node_modules/@google/gemini-cli/bundle" },
    faults: { type: "string",
              default: "none,truncated,cut_mid_frame,transport_error,error_event,empty" },
    model: { type: "string", default: "chaos-1" },
    chunk: { type: "string" },
  },
});

// The chunk that defines the SDK's GoogleGenAI class (its name changes between CLI releases; 0.61.0
// has three such chunks, chunk-5FZXKDXH/JDPZ4CE3/Y2J3C62M, with the same processStreamResponse: the
// CLI itself runs JDPZ4CE3). --chunk picks one by name.
const chunk = values.chunk ?? readdirSync(values.bundle).filter((f) => /^chunk-.*\.js$/.test(f))
  .find((f) => readFileSync(join(values.bundle, f), "utf8").includes("var GoogleGenAI = class {"));
if (!chunk) {
  console.error(`no chunk defining GoogleGenAI under ${values.bundle}`);
  process.exit(2);
}
const target = pathToFileURL(join(values.bundle, chunk)).href;
const hooks = `
export async function load(url, context, next) {
  const result = await next(url, context);
  if (url !== ${JSON.stringify(target)}) return result;
  const source = String(result.source) + "\\nexport { GoogleGenAI as __sseguardGoogleGenAI };\\n";
  return { ...result, source, shortCircuit: true };
}`;
register("data:text/javascript," + encodeURIComponent(hooks));
const { __sseguardGoogleGenAI: GoogleGenAI } = await import(target);

for (const fault of values.faults.split(",")) {
  const ai = new GoogleGenAI({
    apiKey: "AIza-test",
    httpOptions: { baseUrl: values.base, headers: { "x-sseguard-inject": fault } },
  });
  let text = "";
  const row = { fault };
  try {
    const stream = await ai.models.generateContentStream({
      model: values.model, contents: "Say something." });
    for await (const chunk of stream) text += chunk.text ?? "";
    row.outcome = "silent";
  } catch (err) {
    row.outcome = "threw";
    row.error = err?.name ?? typeof err;
    row.message = String(err?.message ?? err).slice(0, 160);
  }
  row.text = text.slice(0, 60);
  console.log(JSON.stringify(row));
}
