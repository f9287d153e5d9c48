package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	openai "github.com/sashabaranov/go-openai"
)

// DefaultAnthropicMaxTokens is the max_tokens of an Anthropic request when the
// bot sets none: the Messages API requires one.
const DefaultAnthropicMaxTokens = 8192

// anthropicModelPath ends the path of a Messages API request (transport).
const anthropicModelPath = "/v1/messages"

// anthropicAPI is the ModelAPI of Anthropic's Messages API, on the official Go
// SDK (DESIGN.md §6). It always streams; it authenticates with the profile's
// API key as x-api-key and reads nothing from the environment. Requests carry
// prompt-cache breakpoints (cacheBreakpoints).
type anthropicAPI struct {
	name     string // the profile's name, for hints
	messages anthropic.MessageService
}

var _ ModelAPI = (*anthropicAPI)(nil)

// newAnthropicAPI builds the client of profile p on hc, whose transport retries
// (so the SDK does not). base nil is Anthropic's API; a trailing /v1 is
// dropped, since the SDK adds it.
func newAnthropicAPI(name string, p Provider, base *url.URL, hc *http.Client) *anthropicAPI {
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(), // no ANTHROPIC_* variables, no profiles on disk
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	}
	if base != nil {
		u := *base
		u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/v1") + "/"
		opts = append(opts, option.WithBaseURL(u.String()))
	}
	if p.APIKey != "" {
		opts = append(opts, option.WithHeader("x-api-key", p.APIKey))
	}
	// Only the Messages service is kept: a whole anthropic.Client held here
	// would make the linker keep every method of every other service's types
	// (about 8 MB of binary).
	return &anthropicAPI{name: name, messages: anthropic.NewClient(opts...).Messages}
}

// Chat implements ModelAPI: one streaming POST /v1/messages, read event by
// event (message_start, content_block_start/delta/stop, message_delta,
// message_stop), whether or not req.Stream asks for it.
func (a *anthropicAPI) Chat(ctx context.Context, req ChatRequest) (ChatAnswer, error) {
	params, opts := anthropicParams(req)
	stream := a.messages.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	var (
		ans     ChatAnswer
		text    strings.Builder
		asm     callAssembler
		stopped bool
		in      anthropicUsage
	)
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			ans.Model = string(ev.Message.Model)
			u := ev.Message.Usage
			in = anthropicUsage{input: u.InputTokens, read: u.CacheReadInputTokens, write: u.CacheCreationInputTokens, output: u.OutputTokens}
		case "content_block_start":
			if cb := ev.ContentBlock; cb.Type == "tool_use" {
				idx := int(ev.Index)
				asm.add(openai.ToolCall{Index: &idx, ID: cb.ID, Function: openai.FunctionCall{Name: cb.Name}})
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				text.WriteString(ev.Delta.Text)
				if req.OnText != nil && ev.Delta.Text != "" {
					req.OnText(ev.Delta.Text)
				}
			case "input_json_delta":
				idx := int(ev.Index)
				asm.add(openai.ToolCall{Index: &idx, Function: openai.FunctionCall{Arguments: ev.Delta.PartialJSON}})
			}
		case "message_delta":
			if r := string(ev.Delta.StopReason); r != "" {
				ans.Finish, ans.Reason = anthropicFinish(r), "stop_reason="+r
			}
			// The counts are cumulative; input counts are repeated by newer
			// servers only.
			u := ev.Usage
			if u.JSON.OutputTokens.Valid() {
				in.output = u.OutputTokens
			}
			if u.JSON.InputTokens.Valid() && u.InputTokens > 0 {
				in.input = u.InputTokens
			}
			if u.JSON.CacheReadInputTokens.Valid() && u.CacheReadInputTokens > 0 {
				in.read = u.CacheReadInputTokens
			}
			if u.JSON.CacheCreationInputTokens.Valid() && u.CacheCreationInputTokens > 0 {
				in.write = u.CacheCreationInputTokens
			}
		case "message_stop":
			stopped = true
		}
	}
	ans.Text = text.String()
	ans.Usage = in.usage()
	if err := stream.Err(); err != nil {
		return ans, a.mapErr(err)
	}
	ans.Calls = asm.calls()
	switch {
	case ans.Finish == "":
		ans.Incomplete = "no stop_reason arrived"
	case !stopped:
		ans.Incomplete = "the server did not send message_stop"
	}
	return ans, nil
}

// anthropicUsage is the usage of a call as the Messages API counts it: input
// excludes the tokens read from and written to the cache.
type anthropicUsage struct{ input, read, write, output int64 }

func (u anthropicUsage) usage() Usage {
	return Usage{InputTokens: int(u.input + u.read + u.write), OutputTokens: int(u.output),
		CacheReadTokens: int(u.read), CacheWriteTokens: int(u.write)}
}

// anthropicFinish maps a stop_reason onto the Finish words.
func anthropicFinish(r string) string {
	switch anthropic.StopReason(r) {
	case anthropic.StopReasonToolUse:
		return FinishToolCalls
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		return FinishLength
	case anthropic.StopReasonRefusal:
		return FinishContentFilter
	}
	return FinishStop // end_turn, stop_sequence, pause_turn
}

// anthropicErrorStatus is the HTTP status of each error type, for an error
// event that arrives mid-stream (its response's status is 200).
var anthropicErrorStatus = map[string]int{
	"invalid_request_error": http.StatusBadRequest,
	"authentication_error":  http.StatusUnauthorized,
	"billing_error":         http.StatusPaymentRequired,
	"permission_error":      http.StatusForbidden,
	"not_found_error":       http.StatusNotFound,
	"request_too_large":     http.StatusRequestEntityTooLarge,
	"rate_limit_error":      http.StatusTooManyRequests,
	"api_error":             http.StatusInternalServerError,
	"timeout_error":         http.StatusGatewayTimeout,
	"overloaded_error":      529,
}

// mapErr turns the SDK's *anthropic.Error into an *apiError; other errors (a
// stall, a network error, ctx's) pass unchanged.
func (a *anthropicAPI) mapErr(err error) error {
	var (
		stall  *StallError
		apiErr *anthropic.Error
	)
	switch {
	case errors.As(err, &stall):
		return err
	case errors.As(err, &apiErr):
		e := &apiError{Status: apiErr.StatusCode, Code: string(apiErr.Type()), Message: apiErr.Message}
		if s, ok := anthropicErrorStatus[e.Code]; ok && (e.Status == 0 || e.Status == http.StatusOK) {
			e.Status = s
		}
		raw := apiErr.RawJSON()
		if e.Message == "" {
			e.Message = bodyText([]byte(raw))
		}
		if e.Status == http.StatusNotFound && !json.Valid([]byte(raw)) {
			e.Hint = fmt.Sprintf(" (is base_url of llm profile %q right? Anthropic's API answers at https://api.anthropic.com)", a.name)
		}
		return e
	}
	return err
}

// anthropicParams is the Messages API request for req, and the request options
// for what the SDK's params do not carry (temperature).
func anthropicParams(req ChatRequest) (anthropic.MessageNewParams, []option.RequestOption) {
	system, msgs := anthropicMessages(req.Messages)
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: DefaultAnthropicMaxTokens,
		System:    system,
		Messages:  msgs,
		Tools:     anthropicTools(req.Tools),
	}
	if req.MaxTokens > 0 {
		p.MaxTokens = int64(req.MaxTokens)
	}
	if e := req.ReasoningEffort; e != "" {
		if e == "minimal" {
			e = "low" // OpenAI's lowest; Anthropic's is low
		}
		p.OutputConfig.Effort = anthropic.OutputConfigEffort(e)
	}
	cacheBreakpoints(&p, req.Messages[:min(max(req.StableEnd, 0), len(req.Messages))])
	var opts []option.RequestOption
	if req.Temperature != nil {
		opts = append(opts, option.WithJSONSet("temperature", *req.Temperature))
	}
	return p, opts
}

// cacheBreakpoints marks the ends of the request's stable prefix with
// cache_control {type: ephemeral} (DESIGN.md §6: stable first, so the cache
// hits), the four the API allows:
//
//  1. the last system block, which caches the tools and the system prompt
//     (the API's prefix order is tools, system, messages); the last tool when
//     there is no system prompt;
//  2. the end of the thread's stable history (stable, ChatRequest.StableEnd:
//     the request's leading messages that the thread's next run sends again
//     byte for byte), which that run reads;
//  3. the message before the newest turn (the model's previous answer): the
//     previous call wrote the cache up to there or further, so this call reads it;
//  4. the newest turn, the last message, which the next call (after tool
//     results, or the thread's next run) reads in turn.
func cacheBreakpoints(p *anthropic.MessageNewParams, stable []openai.ChatCompletionMessage) {
	cc := anthropic.NewCacheControlEphemeralParam()
	switch {
	case len(p.System) > 0:
		p.System[len(p.System)-1].CacheControl = cc
	case len(p.Tools) > 0 && p.Tools[len(p.Tools)-1].OfTool != nil:
		p.Tools[len(p.Tools)-1].OfTool.CacheControl = cc
	}
	mark := func(b anthropic.ContentBlockParamUnion) {
		switch {
		case b.OfText != nil:
			b.OfText.CacheControl = cc
		case b.OfImage != nil:
			b.OfImage.CacheControl = cc
		case b.OfToolUse != nil:
			b.OfToolUse.CacheControl = cc
		case b.OfToolResult != nil:
			b.OfToolResult.CacheControl = cc
		}
	}
	// The stable messages translate to the same leading turns; the last of
	// them may be joined with the next message of its role into one turn, so
	// the mark goes on the block where the stable part ends.
	if _, head := anthropicMessages(stable); len(head) > 0 && len(head) <= len(p.Messages)-2 {
		if n := len(messageBlocks(head[len(head)-1])); n > 0 {
			if blocks := messageBlocks(p.Messages[len(head)-1]); len(blocks) >= n {
				mark(blocks[n-1])
			}
		}
	}
	for i := max(len(p.Messages)-2, 0); i < len(p.Messages); i++ {
		if blocks := messageBlocks(p.Messages[i]); len(blocks) > 0 {
			mark(blocks[len(blocks)-1])
		}
	}
}

func messageBlocks(m anthropic.MessageParam) []anthropic.ContentBlockParamUnion {
	switch {
	case m.OfUser != nil:
		return m.OfUser.Content
	case m.OfAssistant != nil:
		return m.OfAssistant.Content
	}
	return nil
}

// anthropicMessages translates the conversation: system messages become the
// system blocks; user text and images, assistant text and tool calls (tool_use
// blocks), and tool results (tool_result blocks in a user turn) become
// messages, consecutive ones of a role joined into one turn. A conversation
// that starts with the model's turn gets a short user turn first.
func anthropicMessages(msgs []openai.ChatCompletionMessage) ([]anthropic.TextBlockParam, []anthropic.MessageParam) {
	var system []anthropic.TextBlockParam
	type turn struct {
		user   bool
		blocks []anthropic.ContentBlockParamUnion
	}
	var turns []turn
	add := func(user bool, blocks ...anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].user == user {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			return
		}
		turns = append(turns, turn{user: user, blocks: blocks})
	}
	for _, m := range msgs {
		switch m.Role {
		case openai.ChatMessageRoleSystem, openai.ChatMessageRoleDeveloper:
			if t := messageText(m); t != "" {
				system = append(system, anthropic.TextBlockParam{Text: t})
			}
		case openai.ChatMessageRoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			if t := messageText(m); strings.TrimSpace(t) != "" {
				blocks = append(blocks, anthropic.NewTextBlock(t))
			}
			for _, c := range m.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(toolUseID(c.ID), toolInput(c.Function.Arguments), c.Function.Name))
			}
			if len(blocks) == 0 {
				blocks = append(blocks, anthropic.NewTextBlock("(no answer)"))
			}
			add(false, blocks...)
		case openai.ChatMessageRoleTool:
			result := m.Content
			if strings.TrimSpace(result) == "" {
				result = "(no output)" // the API refuses empty text blocks
			}
			add(true, anthropic.NewToolResultBlock(toolUseID(m.ToolCallID), result, false))
		default: // user
			blocks := userBlocks(m)
			if len(blocks) == 0 {
				blocks = append(blocks, anthropic.NewTextBlock("(empty message)"))
			}
			add(true, blocks...)
		}
	}
	if len(turns) > 0 && !turns[0].user {
		turns = append([]turn{{user: true, blocks: []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock("(earlier in this thread)")}}}, turns...)
	}
	out := make([]anthropic.MessageParam, 0, len(turns))
	for _, t := range turns {
		if t.user {
			out = append(out, anthropic.NewUserMessage(t.blocks...))
		} else {
			out = append(out, anthropic.NewAssistantMessage(t.blocks...))
		}
	}
	return system, out
}

// messageText is a message's text: Content, or its text parts joined.
func messageText(m openai.ChatCompletionMessage) string {
	if len(m.MultiContent) == 0 {
		return m.Content
	}
	var parts []string
	for _, p := range m.MultiContent {
		if p.Type == openai.ChatMessagePartTypeText && p.Text != "" {
			parts = append(parts, p.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// userBlocks are a user message's text and image blocks, in order. An image
// given as a data URL (vision.go) is sent as base64, any other as a URL.
func userBlocks(m openai.ChatCompletionMessage) []anthropic.ContentBlockParamUnion {
	if len(m.MultiContent) == 0 {
		if strings.TrimSpace(m.Content) == "" {
			return nil
		}
		return []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock(m.Content)}
	}
	var out []anthropic.ContentBlockParamUnion
	for _, p := range m.MultiContent {
		switch {
		case p.Type == openai.ChatMessagePartTypeText && strings.TrimSpace(p.Text) != "":
			out = append(out, anthropic.NewTextBlock(p.Text))
		case p.Type == openai.ChatMessagePartTypeImageURL && p.ImageURL != nil:
			if typ, data, ok := parseDataURL(p.ImageURL.URL); ok {
				out = append(out, anthropic.NewImageBlockBase64(typ, data))
			} else {
				out = append(out, anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: p.ImageURL.URL}))
			}
		}
	}
	return out
}

// parseDataURL splits "data:<type>;base64,<data>".
func parseDataURL(u string) (typ, data string, ok bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", "", false
	}
	head, data, ok := strings.Cut(rest, ",")
	typ, isB64 := strings.CutSuffix(head, ";base64")
	if !ok || !isB64 || typ == "" {
		return "", "", false
	}
	return typ, data, true
}

// badToolID matches what the API does not accept in a tool_use id: ids made by
// another provider (a profile changed mid-thread) are mended the same way in
// the call and its result.
var badToolID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-zA-Z0-9_-]`) })

func toolUseID(id string) string {
	if id == "" {
		return "call"
	}
	return badToolID().ReplaceAllString(id, "_")
}

// toolInput is a call's arguments as the JSON object tool_use requires; text
// that is not one (the tool's result already told the model so) becomes {}.
func toolInput(args string) any {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		return map[string]any{}
	}
	return json.RawMessage(args)
}

// anthropicTools translates the tool definitions, in their order.
func anthropicTools(tools []openai.Tool) []anthropic.ToolUnionParam {
	out := make([]anthropic.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		if t.Function == nil {
			continue
		}
		tp := anthropic.ToolParam{Name: t.Function.Name, InputSchema: inputSchema(t.Function.Parameters)}
		if t.Function.Description != "" {
			tp.Description = anthropic.String(t.Function.Description)
		}
		out = append(out, anthropic.ToolUnionParam{OfTool: &tp})
	}
	return out
}

// inputSchema is a tool's JSON schema as the SDK holds it: properties and
// required apart, every other keyword kept as it is.
func inputSchema(params any) anthropic.ToolInputSchemaParam {
	var raw []byte
	switch p := params.(type) {
	case json.RawMessage:
		raw = p
	case []byte:
		raw = p
	default:
		raw, _ = json.Marshal(p)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	s := anthropic.ToolInputSchemaParam{Properties: m["properties"]}
	if s.Properties == nil {
		s.Properties = map[string]any{}
	}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
	}
	for k, v := range m {
		if k == "type" || k == "properties" || k == "required" {
			continue
		}
		if s.ExtraFields == nil {
			s.ExtraFields = map[string]any{}
		}
		s.ExtraFields[k] = v
	}
	return s
}
