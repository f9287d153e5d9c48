// Package feishu is the Feishu/Lark adapter (DESIGN.md §1 to §4 and §9): one
// Feishu app is one openbot account. It speaks the Open API and the event protocol
// directly with net/http, because the official SDK is not available here:
//
//   - api.go: tenant_access_token and im/v1/messages (create, reply, patch),
//     https://open.feishu.cn/document/server-docs/im-v1/message/create
//   - webhook.go: events and card callbacks POSTed to the shared HTTP listener,
//     with signature, decryption and verification-token checks,
//     https://open.feishu.cn/document/server-docs/event-subscription-guide/event-subscription-configure-/request-url-configuration-case
//   - ws.go and frame.go: the long connection (endpoint discovery, websocket with
//     protobuf frames, pings, acks, fragment reassembly, reconnects),
//     https://open.feishu.cn/document/server-docs/event-subscription-guide/event-subscription-configure-/request-url-configuration-case#long-connection
//   - inbound.go: im.message.receive_v1 to core.Inbound (mentions, threads, DM policy)
//   - question.go and cardaction.go: questions and approvals as interactive cards
//     with buttons (core.QuestionAdapter) and the card callbacks that answer them
//     through Engine.Answer (DESIGN.md §5),
//     https://open.feishu.cn/document/uAjLw4CM/ukzMukzMukzM/feishu-cards/card-callback-communication
//   - ids.go, format.go, split.go: the id codec, the Markdown formatter and the
//     splitter, each pure and tested alone.
//
// Like every adapter it imports only core, the standard library and libraries (never
// agents, store or config) and reaches the engine through the small Engine interface.
// The package feishutest provides a fake Open API server for tests.
package feishu
