// Package e2e holds the end-to-end tests of openbot: the whole binary's wiring
// (core, the Slack, Telegram, Feishu and console adapters, agents, store) driven
// against the project's fakes on 127.0.0.1 (slacktest, telegramtest, feishutest,
// openaitest, the MCP test servers). Nothing here is imported by the product;
// the package has only this file outside its tests, so the module root shows
// the product and not its tests (STYLE.md "Tests": fakes over mocks).
//
// The kill soak (soak_test.go) builds the real binary by import path
// (openbot/cmd/openbot), so it works from this folder; set OPENBOT_SOAK=1 for
// the long run. Fixtures are read from the adapters' own testdata folders.
package e2e
