package slack

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"openbot/core"
)

// questionPages is what stays of a question when it is resolved, laid out over
// messages: the question's text (the bot's words, formatted to mrkdwn; a
// generated line when it is empty) and, for an approval, the warnings about the
// call, the tool with its command or arguments (core.Question.Prompt) in code
// sections, what still does not fit said with core.Question.NotShown, and what the
// call can reach. Every message's blocks stay within maxMessageText; there are at
// most maxQuestionMessages.
func questionPages(q core.Question, from core.Sender) [][]slack.Block {
	head := formatBounded(q.Text)
	if strings.TrimSpace(q.Text) == "" {
		if q.Kind == core.QuestionApproval {
			head = "*" + escapeText(senderName(from)) + "* asks for approval to run `" + escapeText(q.Tool) + "`"
		} else {
			head = "*" + escapeText(senderName(from)) + "* has a question."
		}
	}
	first := []slack.Block{section(blockText, head)}
	if q.Kind != core.QuestionApproval {
		return [][]slack.Block{first}
	}
	p := q.Prompt()
	used := runes(head)
	if len(p.Warnings) > 0 {
		var w []string
		for _, s := range p.Warnings {
			w = append(w, "⚠️ *"+escapeText(truncate(s, 400))+"*")
		}
		text := strings.Join(w, "\n")
		first = append(first, section(blockWarnings, text))
		used += runes(text)
	}
	var tail []slack.Block // what ends the last message: the note, the reach
	tailLen := 0
	if p.Reach != "" {
		text := "*Reach:* " + escapeText(truncate(p.Reach, maxReachText))
		tail = append(tail, section(blockReach, text))
		tailLen += runes(text)
	}
	reserve := tailLen + 400 + maxFallback // the note, the decision or the buttons

	title := "`" + escapeText(q.Tool) + "` " + strings.ToLower(p.Label) + ":"
	pieces := core.Fold(p.Body, maxCodeText-runes(title)-40, codeSize)
	if len(pieces) == 0 {
		pieces = []string{""}
	}
	pages := [][]slack.Block{first}
	var texts [][]string // each page's code sections, labelled below
	texts = append(texts, nil)
	notShown := 0
	for i, piece := range pieces {
		code := "```\n" + escapeCode(strings.TrimSuffix(piece, "\n")) + "\n```"
		if used+runes(code)+runes(title)+40+reserve > maxMessageText && len(texts[len(texts)-1]) > 0 {
			if len(pages) == maxQuestionMessages {
				for _, rest := range pieces[i:] {
					notShown += utf8.RuneCountInString(rest)
				}
				break
			}
			pages, texts, used = append(pages, nil), append(texts, nil), 0
		}
		texts[len(texts)-1] = append(texts[len(texts)-1], code)
		used += runes(code)
	}
	n := 0
	for i, codes := range texts {
		for j, code := range codes {
			if j == 0 {
				label := title
				if len(pages) > 1 {
					label = fmt.Sprintf("%s _(part %d of %d)_", title, i+1, len(pages))
				}
				code = label + "\n" + code
			}
			id := blockArgs
			if n > 0 {
				id += "_" + strconv.Itoa(n+1)
			}
			pages[i] = append(pages[i], section(id, code))
			n++
		}
	}
	if notShown > 0 {
		tail = append([]slack.Block{section(blockNotShown, "*"+escapeText(q.NotShown(notShown))+"*")}, tail...)
	}
	last := len(pages) - 1
	pages[last] = append(pages[last], tail...)
	return pages
}

// section is a mrkdwn section block.
func section(id, text string) *slack.SectionBlock {
	return slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, text, false, false), nil, nil, slack.SectionBlockOptionBlockID(id))
}

// codeSize is how many characters a rune of a command takes in a code section
// (escapeCode): &, < and > are escaped; a backtick counts twice, enough for the
// zero-width space that keeps a run of three from closing the block.
func codeSize(r rune) int {
	switch r {
	case '&':
		return 5
	case '<', '>':
		return 4
	case '`':
		return 2
	}
	return 1
}

// escapeCode escapes text for a code section: &, < and > for Slack, and no run of
// three backticks left to end the block early.
func escapeCode(s string) string {
	s = escapeText(s)
	for strings.Contains(s, "```") {
		s = strings.ReplaceAll(s, "```", "`\u200b``")
	}
	return s
}

func runes(s string) int { return utf8.RuneCountInString(s) }
