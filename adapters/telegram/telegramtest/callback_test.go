package telegramtest

import (
	"testing"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// TestCallbackThroughLibrary: a pushed CallbackUpdate decodes in telegram-bot-api,
// a keyboard sent by the library reads back through Buttons, and the library's
// answerCallbackQuery and editMessageText are recorded.
func TestCallbackThroughLibrary(t *testing.T) {
	s := NewServer(Bot{Token: token, ID: 1, Username: "fake_bot"})
	defer s.Close()
	bot, err := tgbotapi.NewBotAPIWithAPIEndpoint(token, s.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	msg := tgbotapi.NewMessage(-100, "May I?")
	msg.ReplyMarkup = tgbotapi.NewInlineKeyboardMarkup(tgbotapi.NewInlineKeyboardRow(
		tgbotapi.NewInlineKeyboardButtonData("Approve", "q:tok:0"), tgbotapi.NewInlineKeyboardButtonData("Reject", "q:tok:1")))
	sent, err := bot.Send(msg)
	if err != nil {
		t.Fatal(err)
	}
	rows := Buttons(s.Calls("sendMessage")[0])
	if len(rows) != 1 || len(rows[0]) != 2 || rows[0][1] != (Button{"Reject", "q:tok:1"}) {
		t.Fatalf("Buttons = %+v", rows)
	}

	if _, err := s.PushUpdate(token, CallbackUpdate("cb1", Clicker{ID: 42, FirstName: "Carol", Username: "carol"}, -100, int64(sent.MessageID), "q:tok:0")); err != nil {
		t.Fatal(err)
	}
	ups, err := bot.GetUpdates(tgbotapi.UpdateConfig{Timeout: 1})
	if err != nil || len(ups) != 1 || ups[0].CallbackQuery == nil {
		t.Fatalf("GetUpdates = %+v, %v", ups, err)
	}
	cq := ups[0].CallbackQuery
	if cq.ID != "cb1" || cq.From.ID != 42 || cq.From.UserName != "carol" || cq.Data != "q:tok:0" ||
		cq.Message.MessageID != sent.MessageID || cq.Message.Chat.ID != -100 {
		t.Fatalf("callback query %+v", cq)
	}

	if _, err := bot.Request(tgbotapi.NewCallbackWithAlert(cq.ID, "Already decided")); err != nil {
		t.Fatal(err)
	}
	if _, err := bot.Send(tgbotapi.NewEditMessageText(-100, sent.MessageID, "May I?\n\nApproved by Carol")); err != nil {
		t.Fatal(err)
	}
	ack := s.Calls("answerCallbackQuery")
	if len(ack) != 1 || ack[0].Params["callback_query_id"] != "cb1" || ack[0].Params["show_alert"] != "true" {
		t.Fatalf("answerCallbackQuery calls %+v", ack)
	}
	edits := s.Calls("editMessageText")
	if len(edits) != 1 || edits[0].Params["message_id"] != "1000" || Buttons(edits[0]) != nil {
		t.Fatalf("editMessageText calls %+v", edits)
	}
}
