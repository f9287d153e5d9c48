package feishu

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
)

// sdkLogger adapts the SDK's larkcore.Logger onto slog without ever passing on a
// body or a token: Debug lines (where the SDK prints requests and answers) are
// dropped, other lines are cut before any "Body"/"response:" part, and bearer
// tokens, tenant/app/user tokens (t-, a-, u- prefixed) and app_secret values are
// replaced by [redacted]. SDK Info lines go to slog Debug (they are connection
// chatter); Warn and Error keep their level.
type sdkLogger struct{ log *slog.Logger }

func (l sdkLogger) Debug(context.Context, ...any) {}

func (l sdkLogger) Info(ctx context.Context, args ...any) { l.emit(ctx, slog.LevelDebug, args) }

func (l sdkLogger) Warn(ctx context.Context, args ...any) { l.emit(ctx, slog.LevelWarn, args) }

func (l sdkLogger) Error(ctx context.Context, args ...any) { l.emit(ctx, slog.LevelError, args) }

func (l sdkLogger) emit(ctx context.Context, level slog.Level, args []any) {
	if l.log == nil || !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, "feishu sdk", "detail", redactSDK(fmt.Sprint(args...)))
}

// maxSDKLogLine bounds one SDK log line after redaction, in bytes.
const maxSDKLogLine = 300

var (
	sdkBearer = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)bearer\s+\S+`) })
	sdkToken  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\b[tau]-[A-Za-z0-9_.\-]{8,}`) })
	sdkSecret = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)("?(app_?secret|appsecret|access_?token|tenant_access_token|encrypt_?key)"?\s*[:=]\s*)"?[^",\s}]*"?`)
	})
)

// redactSDK removes bodies, tokens and secrets from one SDK log line.
func redactSDK(s string) string {
	for _, cut := range []string{"Body:", "body:", "response:", "resp:", "req:"} {
		if i := strings.Index(s, cut); i >= 0 {
			s = s[:i] + cut + " [omitted]"
		}
	}
	s = sdkBearer().ReplaceAllString(s, "Bearer [redacted]")
	s = sdkSecret().ReplaceAllString(s, "${1}[redacted]")
	s = sdkToken().ReplaceAllString(s, "[redacted]")
	if len(s) > maxSDKLogLine {
		s = s[:maxSDKLogLine] + "..."
	}
	return s
}
