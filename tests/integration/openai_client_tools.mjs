// Tool calls, reasoning and structured output through the official `openai` npm package, on a
// random-weight model whose output is driven by structured output: tool_choice "required" and a
// named function (calls whose arguments follow the tool's schema), a Hermes <tool_call> and a
// <think> block written by the model through guided_choice and parsed back by the router's
// hermes / qwen3 parsers, each non-streaming and streaming (incremental tool_calls deltas, also
// reassembled by the client's stream helper), and response_format json_schema.
// Exits non-zero on the first mismatch. Usage: ROUTER_URL=http://127.0.0.1:2000/v1 node
// openai_client_tools.mjs
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: process.env.ROUTER_URL ?? 'http://127.0.0.1:2000/v1',
  apiKey: 'not-needed',
  maxRetries: 0,
  timeout: 60_000,
});
const model = (await client.models.list()).data[0].id;
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['C', 'F'] } },
        required: ['city', 'unit'],
      },
    },
  },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } },
];

// Collects a streamed chat: content, reasoning, tool calls by index (OpenAI's deltas: a
// call's first delta has its id, type and name, the later ones argument fragments only).
async function collect(stream) {
  const out = { content: '', reasoning: '', calls: [], finish: null };
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      const d = choice.delta ?? {};
      out.content += d.content ?? '';
      out.reasoning += d.reasoning_content ?? '';
      for (const t of d.tool_calls ?? []) {
        const first = out.calls[t.index] === undefined;
        assert.equal(t.index, first ? out.calls.length : out.calls.length - 1, JSON.stringify(t));
        assert.equal(first, t.id !== undefined, `id in the first delta only: ${JSON.stringify(t)}`);
        assert.equal(first, t.function?.name !== undefined, JSON.stringify(t));
        const call = (out.calls[t.index] ??= { id: '', name: '', arguments: '', fragments: 0 });
        call.id += t.id ?? '';
        call.name += t.function?.name ?? '';
        call.arguments += t.function?.arguments ?? '';
        if (!first) call.fragments++;
      }
      if (choice.finish_reason) out.finish = choice.finish_reason;
    }
  }
  return out;
}

function checkWeatherArgs(text) {
  const args = JSON.parse(text);
  assert.equal(typeof args.city, 'string');
  assert.ok([...args.city].length <= 12, text);
  assert.ok(['C', 'F'].includes(args.unit), text);
}

// 1. tool_choice "required": one call to a declared tool, arguments valid JSON of its schema.
for (let seed = 0; seed < 5; seed++) {
  const r = await client.chat.completions.create({
    model, messages, tools, tool_choice: 'required', parallel_tool_calls: false,
    temperature: 1, seed, max_tokens: 400,
  });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(r));
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.ok(call.id.length > 0);
  assert.ok(['get_weather', 'get_time'].includes(call.function.name));
  if (call.function.name === 'get_weather') checkWeatherArgs(call.function.arguments);
  else assert.equal(typeof JSON.parse(call.function.arguments), 'object');
}

// 2. A named function, streamed: the deltas assemble one get_weather call.
const named = await collect(await client.chat.completions.create({
  model, messages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
  max_tokens: 400, stream: true,
}));
assert.equal(named.finish, 'tool_calls');
assert.equal(named.calls.length, 1);
assert.equal(named.calls[0].name, 'get_weather');
checkWeatherArgs(named.calls[0].arguments);

// 3. The model's own formats parsed back (tool_choice auto): a <think> block and a Hermes
//    <tool_call>, written by the model because guided_choice allows only that text.
const written = '<think>The user wants the weather.</think>' +
  '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}\n</tool_call>';
const parsed = await client.chat.completions.create({
  model, messages, tools, max_tokens: 400, guided_choice: [written],
});
const m = parsed.choices[0];
assert.equal(m.finish_reason, 'tool_calls', JSON.stringify(parsed));
assert.equal(m.message.reasoning_content, 'The user wants the weather.');
assert.equal(m.message.tool_calls.length, 1);
assert.equal(m.message.tool_calls[0].function.name, 'get_weather');
assert.deepEqual(JSON.parse(m.message.tool_calls[0].function.arguments), { city: 'Paris', unit: 'C' });
assert.ok(m.message.content === null || m.message.content === '', JSON.stringify(m.message));
const streamed = await collect(await client.chat.completions.create({
  model, messages, tools, max_tokens: 400, guided_choice: [written], stream: true,
}));
assert.equal(streamed.finish, 'tool_calls');
assert.equal(streamed.reasoning, 'The user wants the weather.');
assert.equal(streamed.content, '');
assert.equal(streamed.calls.length, 1);
assert.equal(streamed.calls[0].name, 'get_weather');
assert.deepEqual(JSON.parse(streamed.calls[0].arguments), { city: 'Paris', unit: 'C' });
// The arguments came as fragments after the call's first delta (how many depends on how many
// tokens each coordinator message carries; the router's unit tests check the split).
assert.ok(streamed.calls[0].fragments >= 1, JSON.stringify(streamed.calls[0]));

// The official stream helper reassembles the deltas: argument delta events, then a final
// completion holding the call.
const helper = client.beta.chat.completions.stream({
  model, messages, tools, max_tokens: 400, guided_choice: [written],
});
let argumentDeltas = 0;
helper.on('tool_calls.function.arguments.delta', () => { argumentDeltas++; });
const final = await helper.finalChatCompletion();
const fc = final.choices[0];
assert.equal(fc.finish_reason, 'tool_calls', JSON.stringify(final));
assert.equal(fc.message.tool_calls.length, 1, JSON.stringify(final));
assert.ok(fc.message.tool_calls[0].id.startsWith('call_'));
assert.equal(fc.message.tool_calls[0].type, 'function');
assert.equal(fc.message.tool_calls[0].function.name, 'get_weather');
assert.equal(fc.message.tool_calls[0].function.arguments, '{"city":"Paris","unit":"C"}');
assert.ok(argumentDeltas >= 1, `arguments in ${argumentDeltas} deltas`);

// Two calls after some content, the second with its arguments before its name: streamed as
// indices 0 and 1 with their own ids, the same as the non-streamed message.
const two = '<think>Two things.</think>Checking.<tool_call>\n{"name": "get_weather", ' +
  '"arguments": {"city": "Rome", "unit": "F"}}\n</tool_call>\n<tool_call>\n' +
  '{"arguments": {}, "name": "get_time"}\n</tool_call>';
const twoWhole = (await client.chat.completions.create({
  model, messages, tools, max_tokens: 400, guided_choice: [two],
})).choices[0];
const twoStreamed = await collect(await client.chat.completions.create({
  model, messages, tools, max_tokens: 400, guided_choice: [two], stream: true,
}));
assert.equal(twoWhole.finish_reason, 'tool_calls');
assert.equal(twoStreamed.finish, 'tool_calls');
assert.equal(twoStreamed.reasoning, 'Two things.');
assert.equal(twoStreamed.content, twoWhole.message.content);
assert.equal(twoStreamed.content, 'Checking.');
assert.equal(twoStreamed.calls.length, 2);
assert.notEqual(twoStreamed.calls[0].id, twoStreamed.calls[1].id);
for (const [k, call] of twoStreamed.calls.entries()) {
  assert.ok(call.id.startsWith('call_'));
  assert.equal(call.name, twoWhole.message.tool_calls[k].function.name);
  assert.equal(call.arguments, twoWhole.message.tool_calls[k].function.arguments);
}
assert.equal(twoStreamed.calls[1].arguments, '{}');

// 4. Reasoning then an answer, no tools.
const answer = await collect(await client.chat.completions.create({
  model, messages, max_tokens: 200, stream: true,
  guided_choice: ['<think>Paris is in France.</think>It is sunny.'],
}));
assert.equal(answer.reasoning, 'Paris is in France.');
assert.equal(answer.content, 'It is sunny.');
assert.equal(answer.finish, 'stop');

// 5. response_format json_schema.
const schema = {
  type: 'object',
  properties: { answer: { type: 'string', maxLength: 20 }, confidence: { type: 'number' } },
  required: ['answer', 'confidence'],
};
const structured = await client.chat.completions.create({
  model, messages, max_tokens: 300, temperature: 1, seed: 3,
  response_format: { type: 'json_schema', json_schema: { name: 'reply', schema, strict: true } },
});
assert.equal(structured.choices[0].finish_reason, 'stop');
const value = JSON.parse(structured.choices[0].message.content);
assert.equal(typeof value.answer, 'string');
assert.equal(typeof value.confidence, 'number');
assert.deepEqual(Object.keys(value), ['answer', 'confidence']);

// 6. A schema the server cannot enforce is a 400 naming the field.
try {
  await client.chat.completions.create({
    model, messages,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'integer', not: { const: 3 } } } },
  });
  assert.fail('an unsupported schema keyword is an error');
} catch (e) {
  assert.ok(e instanceof OpenAI.BadRequestError, String(e));
  assert.equal(e.param, 'response_format');
}
console.log('openai client tools ok');
