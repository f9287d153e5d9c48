// Package telegram puts openbot's bots into Telegram through the Bot API
// (core.telegram.org/bots/api) with github.com/go-telegram-bot-api/telegram-bot-api/v5
// (DESIGN.md sections 1 to 4 and 9). One Adapter is one bot token
// (an "account"): it receives updates by long polling from its own getUpdates loop
// (the offset is persisted only after core has stored the update) or by webhook,
// decides which messages start a run (every private message, and in groups only
// messages addressed to this bot), turns them into core.Inbound values, and delivers
// replies as Telegram HTML split at 4,096 UTF-16 code units. Questions of paused
// runs (DESIGN.md §5) are messages with an inline keyboard whose
// callback_data is "q:<token>:<index>"; a click (callback_query) is answered through
// Engine.Answer and acknowledged with answerCallbackQuery, and the decision later
// replaces the buttons (editMessageText).
//
// Files: ids.go builds and parses thread keys, conversation refs and dedup keys;
// format.go converts Markdown to Telegram HTML; split.go cuts it into messages;
// wire.go holds the Bot API types the library lacks (forum topics, reply_parameters);
// inbound.go classifies updates; poll.go and webhook.go receive them; outbound.go
// delivers; question.go posts and resolves questions; callback.go handles button
// clicks; typing.go shows "typing…" while core reports a bot working in the chat
// (core.WorkIndicator). The fake Bot API
// server for tests is in package telegramtest.
//
// Choices where the spec leaves room:
//   - A group message that does not address this bot is not ingested at all (not
//     even into a known thread), so chatter in a group never wakes a bot.
//   - A group (and a forum's General topic) is one current dialog, "telegram:<chat>";
//     a reply to any message in the group joins it, and /new@bot starts the next one.
//     Reply chains into an older dialog would need core to map platform message ids
//     to threads, which it does not expose yet.
//   - Bare commands in groups are ignored (they may be meant for another bot); in a
//     private chat, /new starts a new thread, /help lists the team, and any other
//     command is passed on as text.
//   - allow_users and dm_policy apply to private chats only.
package telegram
