package telegramtest

import (
	"encoding/json"
	"strconv"
)

// Button is one inline keyboard button as a client sent it in reply_markup.
type Button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

// Buttons returns the inline keyboard rows of a recorded sendMessage or edit call's
// reply_markup, nil when it has none (editMessageText without reply_markup removes
// the keyboard, so a resolved question reads as nil).
func Buttons(c Call) [][]Button {
	var rm struct {
		InlineKeyboard [][]Button `json:"inline_keyboard"`
	}
	if json.Unmarshal([]byte(c.Params["reply_markup"]), &rm) != nil {
		return nil
	}
	return rm.InlineKeyboard
}

// Clicker is the user who clicks an inline button.
type Clicker struct {
	ID        int64
	FirstName string
	Username  string
}

// CallbackUpdate builds a callback_query update (core.telegram.org/bots/api#callbackquery)
// without update_id, for PushUpdate or a webhook POST: from clicked the button with
// data under the bot's message messageID in chat (negative chat ids are
// supergroups). queryID is the callback_query id answerCallbackQuery must echo.
func CallbackUpdate(queryID string, from Clicker, chat, messageID int64, data string) []byte {
	chatType := "private"
	if chat < 0 {
		chatType = "supergroup"
	}
	user := map[string]any{"id": from.ID, "is_bot": false, "first_name": from.FirstName}
	if from.Username != "" {
		user["username"] = from.Username
	}
	b, _ := json.Marshal(map[string]any{"callback_query": map[string]any{
		"id":   queryID,
		"from": user,
		"message": map[string]any{
			"message_id": messageID, "date": 1767225790,
			"chat": map[string]any{"id": chat, "type": chatType},
		},
		"chat_instance": strconv.FormatInt(-chat, 10),
		"data":          data,
	}})
	return b
}
