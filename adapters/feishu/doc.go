// Package feishu is the Feishu/Lark adapter (DESIGN.md §1 to §4 and §9): one
// Feishu app is one openbot account.
//
// # What comes from the official SDK
//
// Open API calls and payload types come from github.com/larksuite/oapi-sdk-go/v3
// (pinned at v3.9.4), importing only its core, im/v1, contact/v3 and card-callback
// packages (not the root lark package, which links every service):
//
//   - calls.go, sdk.go: message create, reply (in thread), patch (cards), delete,
//     reactions (typed larkim calls), user names (typed larkcontact call), the
//     tenant_access_token request, bot info and long-connection endpoint discovery
//     (larkcore.Request, the SDK's untyped call); answers decoded into SDK types;
//     typed errors mapped onto core.DeliveryError (APIError);
//   - inbound.go, cardaction.go: im.message.receive_v1 decoded into
//     larkim.P2MessageReceiveV1Data, card.action.trigger into
//     larkcallback.CardActionTriggerRequest;
//   - sdklog.go: the SDK's logger is an adapter onto slog that drops debug lines
//     and redacts bodies, tokens and secrets from the rest.
//
// # What openbot does itself, and why
//
// Each is a place where the SDK (checked in the v3.9.4 source) falls short of
// openbot's standards:
//
//   - Token cache (sdk.go): the SDK's cache is one process-wide map keyed by app_id
//     on the wall clock, and its retry on 99991663 re-reads the same stale token;
//     openbot keeps a per-account cache on core.Clock, drops a refused token and
//     retries once with a fresh one (fetched through the SDK).
//   - Rate limits and bounded I/O (sdk.go): the SDK does not retry rate limits,
//     reads answers without a size limit and prints non-JSON error pages into its
//     errors; openbot waits out a short x-ogw-ratelimit-reset, turns longer ones
//     into RetryAfter, bounds each request by time and size.
//   - Webhook verification (webhook.go, crypto.go): the SDK's EventDispatcher.Handle
//     logs the whole request body at debug, AES-decrypts and JSON-parses the body
//     before it checks the signature, compares signatures with == and has no
//     timestamp freshness window. openbot verifies X-Lark-Signature over the raw body
//     first, in constant time, with a freshness window, and refuses everything else
//     with one uniform answer (no padding oracle), logged at WARN.
//   - Long connection (ws.go, frame.go, keyed.go): the SDK's ws.Client.Start ends in
//     select {} and never returns (it cannot be stopped within openbot's bounded
//     shutdown), handles every frame in its own unbounded goroutine (no order within
//     a chat), and logs payloads at debug. openbot acks an event only after its
//     durable ingest, runs events concurrently across chats and in order within one
//     (bounded), and stops with ctx. Its frame type lives in the same package as
//     that client (linking gorilla/websocket and gogo/protobuf), so openbot keeps its
//     own small protobuf codec.
//
// The other files: question.go (questions and approvals as interactive cards,
// DESIGN.md §5), stream.go and working.go (streaming card updates and the work
// reaction), ids.go, format.go, split.go (the id codec, the Markdown formatter and
// the splitter, each pure and tested alone).
//
// Like every adapter it imports only core, the standard library and libraries (never
// agents, store or config) and reaches the engine through the small Engine interface.
// The package feishutest provides a fake Open API server for tests, speaking the
// real wire protocol so the SDK's code paths run against it.
package feishu
