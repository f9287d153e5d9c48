// Package agents is openbot's agent loop (seed §6, DESIGN.md §6): it implements
// core.Agent on sashabaranov/go-openai against any OpenAI-compatible server.
//
// One Execute call is one run: it unrolls the thread through core.RunEnv into a
// system prompt and a history (scoped for delegates, (new)-marked triggers,
// bounded by a token budget and a message cap), then loops model call -> parallel
// tool calls -> model call until the model answers without tools or a limit is hit.
// Streaming is always on; tool-call deltas are assembled by index. Every step is
// recorded as a run event and checkpointed.
//
// Tools come from a Registry that every tool source (built-ins, MCP servers) adds
// to; the history tools read_history and recall_messages are always available.
// Text from people, other bots and tools reaches the model wrapped in
// <untrusted> tags.
package agents
