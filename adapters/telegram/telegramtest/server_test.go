package telegramtest

import (
	"context"
	"errors"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

const token = "1:TEST"

// TestWithLibrary drives the fake through telegram-bot-api's own client, as created
// by NewBotAPIWithAPIEndpoint (which calls getMe).
func TestWithLibrary(t *testing.T) {
	s := NewServer(Bot{Token: token, ID: 1, Username: "fake_bot"})
	defer s.Close()
	bot, err := tgbotapi.NewBotAPIWithAPIEndpoint(token, s.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	if bot.Self.UserName != "fake_bot" || bot.Self.ID != 1 {
		t.Fatalf("getMe = %+v", bot.Self)
	}

	for _, u := range []string{
		`{"message":{"message_id":1,"date":1,"chat":{"id":5,"type":"private"},"text":"one"}}`,
		`{"message":{"message_id":2,"date":1,"chat":{"id":5,"type":"private"},"text":"two"}}`,
	} {
		if _, err := s.PushUpdate(token, []byte(u)); err != nil {
			t.Fatal(err)
		}
	}
	ups, err := bot.GetUpdates(tgbotapi.UpdateConfig{Offset: 0, Timeout: 1})
	if err != nil || len(ups) != 2 || ups[0].UpdateID != 1 || ups[1].Message.Text != "two" {
		t.Fatalf("GetUpdates = %+v, %v", ups, err)
	}
	// Offset 2 confirms update 1 only.
	ups, err = bot.GetUpdates(tgbotapi.UpdateConfig{Offset: 2, Timeout: 1})
	if err != nil || len(ups) != 1 || ups[0].UpdateID != 2 {
		t.Fatalf("GetUpdates(offset 2) = %+v, %v", ups, err)
	}
	if s.Confirmed(token) != 2 || s.Pending(token) != 1 {
		t.Errorf("confirmed %d pending %d, want 2 and 1", s.Confirmed(token), s.Pending(token))
	}
	// Nothing queued: an empty answer after the (capped) long-poll wait.
	start := time.Now()
	ups, err = bot.GetUpdates(tgbotapi.UpdateConfig{Offset: 3, Timeout: 30})
	if err != nil || len(ups) != 0 {
		t.Fatalf("GetUpdates(offset 3) = %+v, %v", ups, err)
	}
	if time.Since(start) > 10*time.Second {
		t.Error("long poll not capped")
	}

	s.Fail("sendMessage", RateLimited(3))
	_, err = bot.Send(tgbotapi.NewMessage(5, "hi"))
	var te *tgbotapi.Error
	if !errors.As(err, &te) || te.Code != 429 || te.RetryAfter != 3 {
		t.Fatalf("scripted 429: %v", err)
	}
	m, err := bot.Send(tgbotapi.NewMessage(5, "hi"))
	if err != nil || m.MessageID == 0 || m.Text != "hi" || m.Chat.ID != 5 {
		t.Fatalf("sendMessage = %+v, %v", m, err)
	}
	calls := s.Calls("sendMessage")
	if len(calls) != 2 || calls[1].Params["text"] != "hi" || calls[1].Params["chat_id"] != "5" {
		t.Errorf("recorded %+v", calls)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := s.WaitCalls(ctx, "getMe", 1); err != nil {
		t.Error(err)
	}
}

func TestUnknownTokenAndWebhookConflict(t *testing.T) {
	s := NewServer(Bot{Token: token, ID: 1, Username: "fake_bot"})
	defer s.Close()
	if _, err := tgbotapi.NewBotAPIWithAPIEndpoint("2:other", s.Endpoint()); err == nil {
		t.Error("unknown token accepted")
	}
	bot, err := tgbotapi.NewBotAPIWithAPIEndpoint(token, s.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bot.MakeRequest("setWebhook", tgbotapi.Params{"url": "https://x/hook", "secret_token": "s"}); err != nil {
		t.Fatal(err)
	}
	if u, sec := s.Webhook(token); u != "https://x/hook" || sec != "s" {
		t.Errorf("webhook %q %q", u, sec)
	}
	_, err = bot.GetUpdates(tgbotapi.UpdateConfig{Timeout: 1})
	var te *tgbotapi.Error
	if !errors.As(err, &te) || te.Code != 409 {
		t.Errorf("getUpdates with a webhook set: %v, want 409", err)
	}
}
