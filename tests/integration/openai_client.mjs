// Talks to the router with the official `openai` npm package: models, a chat completion, the
// same chat streamed (with include_usage), a completion, and a 404 error. Exits non-zero on
// the first mismatch. Usage: ROUTER_URL=http://127.0.0.1:2000/v1 node openai_client.mjs
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: process.env.ROUTER_URL ?? 'http://127.0.0.1:2000/v1',
  apiKey: 'not-needed',
  maxRetries: 0,
  timeout: 60_000,
});
const model = process.env.ROUTER_MODEL ?? 'stories260K';
const messages = [{ role: 'user', content: 'Once upon a time' }];

const models = await client.models.list();
assert.ok(models.data.some((m) => m.id === model), `model ${model} is listed`);

const chat = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
assert.equal(chat.object, 'chat.completion');
assert.equal(chat.choices[0].message.role, 'assistant');
const text = chat.choices[0].message.content;
assert.ok(text.length > 0, 'chat content is not empty');
assert.equal(chat.usage.total_tokens, chat.usage.prompt_tokens + chat.usage.completion_tokens);

const stream = await client.chat.completions.create({
  model, messages, max_tokens: 24, temperature: 0, stream: true,
  stream_options: { include_usage: true },
});
let streamed = '';
let finish = null;
let usage = null;
for await (const chunk of stream) {
  assert.equal(chunk.object, 'chat.completion.chunk');
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) {
    streamed += choice.delta?.content ?? '';
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
assert.equal(streamed, text, 'stream and non-stream give the same text');
assert.equal(finish, chat.choices[0].finish_reason);
assert.deepEqual(usage, chat.usage);

const completion = await client.completions.create({
  model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0,
});
assert.equal(completion.object, 'text_completion');
assert.equal(completion.usage.completion_tokens, completion.choices[0].finish_reason === 'length' ? 8 : completion.usage.completion_tokens);

try {
  await client.chat.completions.create({ model: 'no-such-model', messages });
  assert.fail('an unknown model is an error');
} catch (e) {
  assert.ok(e instanceof OpenAI.APIError, String(e));
  assert.equal(e.status, 404);
}
console.log(`openai client ok: ${JSON.stringify(text)}`);
