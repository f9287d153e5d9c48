package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"charm.land/huh/v2"
	"golang.org/x/term"
)

// initForm asks `openbot init`'s questions: huh's forms on a terminal, its
// accessible mode (one plain prompt a line) when the input is piped.
type initForm struct {
	in       *lineReader
	out      io.Writer
	terminal bool
}

func newInitForm(stdin io.Reader, stdout io.Writer) *initForm {
	f := &initForm{in: &lineReader{r: bufio.NewReader(stdin)}, out: stdout}
	if file, ok := stdin.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
		f.terminal = true
	}
	return f
}

// errInputEnded: the piped answers ran out before init was done.
var errInputEnded = errors.New("the input ended before every question was answered")

func (f *initForm) run(fields ...huh.Field) error {
	form := huh.NewForm(huh.NewGroup(fields...)).WithOutput(f.out)
	if f.terminal {
		form = form.WithInput(os.Stdin)
	} else {
		form = form.WithAccessible(true).WithInput(f.in)
	}
	err := form.Run()
	if errors.Is(err, huh.ErrUserAborted) {
		return errors.New("stopped; nothing was written")
	}
	if err == nil && f.in.eof {
		return errInputEnded
	}
	return err
}

// secret is an input that hides what is typed on a terminal.
func (f *initForm) secret(title string, v *string) *huh.Input {
	in := huh.NewInput().Title(title).Value(v)
	if f.terminal {
		in = in.EchoMode(huh.EchoModePassword)
	}
	return in
}

func (f *initForm) channels(a *initAnswers, have map[string]bool) error {
	if len(a.Channels) > 0 {
		return nil
	}
	var opts []huh.Option[string]
	for _, c := range initChannels {
		if !have[c] {
			opts = append(opts, huh.NewOption(c, c))
		}
	}
	if len(opts) == 0 {
		return nil
	}
	title := "Which channels should the bots answer in?"
	if len(have) > 0 {
		title = "Add which channels?"
	}
	return f.run(huh.NewMultiSelect[string]().Title(title).Options(opts...).Value(&a.Channels))
}

func (f *initForm) model(a *initAnswers) error {
	if a.Provider == "" {
		a.Provider = "openai"
		if err := f.run(huh.NewSelect[string]().Title("Which model API?").Options(
			huh.NewOption("OpenAI, or any OpenAI-compatible server (Ollama, vLLM, OpenRouter, Azure…)", "openai"),
			huh.NewOption("Anthropic", "anthropic")).Value(&a.Provider)); err != nil {
			return err
		}
	}
	var fields []huh.Field
	if a.BaseURL == "" && a.Provider == "openai" {
		fields = append(fields, huh.NewInput().Title("Base URL (empty: OpenAI's; Ollama: http://localhost:11434/v1)").Value(&a.BaseURL))
	}
	if a.Model == "" {
		fields = append(fields, huh.NewInput().Title("Model (empty: the provider's default)").Value(&a.Model))
	}
	if a.APIKey == "" {
		fields = append(fields, f.secret("API key (empty for a server that needs none)", &a.APIKey))
	}
	if len(fields) == 0 {
		return nil
	}
	if err := f.run(fields...); err != nil {
		return err
	}
	a.APIKey = strings.TrimSpace(a.APIKey)
	return nil
}

func (f *initForm) tokens(c string, a *initAnswers) error {
	var fields []huh.Field
	switch c {
	case "slack":
		fields = append(fields, f.secret("Slack app-level token (xapp-…)", &a.SlackAppToken), f.secret("Slack bot token (xoxb-…)", &a.SlackBotToken))
	case "telegram":
		fields = append(fields, f.secret("Telegram bot token", &a.TelegramToken))
	case "feishu":
		fields = append(fields, huh.NewInput().Title("Feishu App ID").Value(&a.FeishuAppID), f.secret("Feishu App Secret", &a.FeishuAppSecret))
	}
	if err := f.run(fields...); err != nil {
		return err
	}
	for _, p := range []*string{&a.SlackAppToken, &a.SlackBotToken, &a.TelegramToken, &a.FeishuAppID, &a.FeishuAppSecret} {
		*p = strings.TrimSpace(*p)
	}
	return nil
}

func (f *initForm) owner(a *initAnswers) error {
	if a.Owner != "" {
		return nil
	}
	return f.run(huh.NewInput().
		Title("Your own id, to own the bots (telegram:<user id>, slack:<team id>:<user id>, feishu:<open_id>; empty: the first person you pair with a DM's code)").
		Value(&a.Owner).Validate(func(s string) error {
		if s = strings.TrimSpace(s); s != "" && !strings.HasPrefix(s, "telegram:") && !strings.HasPrefix(s, "slack:") && !strings.HasPrefix(s, "feishu:") {
			return fmt.Errorf("%q does not start with telegram:, slack: or feishu:", s)
		}
		return nil
	}))
}

func (f *initForm) confirm(q string) (bool, error) {
	var yes bool
	err := f.run(huh.NewConfirm().Title(q).Value(&yes))
	return yes, err
}

// lineReader hands its reader's input out one line at a time, so each of huh's
// accessible prompts (which wraps the reader in a new bufio.Scanner) reads its
// own answer and no more.
type lineReader struct {
	r   *bufio.Reader
	eof bool
}

func (l *lineReader) Read(p []byte) (int, error) {
	line, err := l.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		err = nil
	}
	n := copy(p, line)
	if n < len(line) {
		return n, errors.New("line longer than the read buffer")
	}
	if err == io.EOF {
		l.eof = true
	}
	return n, err
}
