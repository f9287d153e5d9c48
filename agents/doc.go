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
// to; read_history, recall_messages and ask_human are always available
// (BuiltinTools). Text from people, other bots and tools reaches the model wrapped
// in <untrusted> tags.
//
// Human in the loop (DESIGN.md §5, seed §7): a call to ask_human, to a tool
// matched by the bot's ApprovalTools, or that its tool says needs approval
// (CallApprover: http_fetch sending data), is not run; an approval carries what
// the call can reach and the tool's warnings about its arguments when the tool
// says (CallReacher, such as the shell with its timeout and hidden-content
// warnings; else Reacher's sentence). The turn's other calls run
// first; then Execute returns core.Result.Pause for the first waiting call with a
// versioned JSON checkpoint (prompt as sent, transcript, results so far, pending
// calls, usage). When core resumes the run (core.Job.Resume), Execute restores it,
// runs an approved tool exactly once with the approved arguments (or feeds the
// rejection, expiry or answer to the model), pauses again for the turn's next
// waiting call, and otherwise continues the loop. Model-call limits count across
// segments; each segment's Result.Usage is only its own.
//
// A bot names a fallback chain of llm profiles (core.BotProfile.Chain,
// chain.go). A call goes to the first profile not cooling down; a 429, 408,
// 5xx, timeout, connection failure, stalled or cut stream, missing model (404)
// or refused key cools that profile down (Retry-After honoured, Cooldowns,
// shared by the process) and moves on to the next at once. Only the chain's
// last usable profile retries the same endpoint (at most DefaultModelRetries
// times, Retry-After honoured, exponential backoff otherwise, bounded by the
// context). A context-length error is no reason to fall back. A profile's
// several API keys rotate; a refused or rate-limited key gives way to the next
// at once and is set aside. An empty answer, an answer cut off at the token limit
// and a stream that ends without a finish_reason or [DONE] are errors that say so.
// A server that answers a streaming request with a plain JSON completion works.
package agents
