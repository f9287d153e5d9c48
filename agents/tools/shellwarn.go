package tools

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Shell command warnings: the approval prompt of a shell call shows the command
// as it will run, and these say when what runs is not what a person reads there
// (content decoded and run, a script downloaded and run, text put together by
// eval, characters spelled as escapes, long encoded-looking text). They are
// heuristics over the command text, not a parser: they catch the usual shapes of
// hidden payloads and stay quiet on ordinary commands. A command without a
// warning is not vouched for.

// interpreters are programs that run the text they are given as code.
const interpreters = `(?:sh|bash|zsh|dash|ksh|ash|fish|python[0-9.]*|perl|ruby|node|nodejs|php|lua|tclsh|pwsh|powershell|osascript)`

// wrappers may stand before a program: sudo, env, exec and the like, with their
// flags, and a path before the program's name.
const wrappers = `(?:(?:sudo|doas|env|exec|nohup|xargs|command|busybox)(?:\s+-\S+)*\s+)*(?:\S*/)?`

// runner is a program that runs code, eval and source (or .) included, at the
// start of a command word.
const runner = wrappers + `(?:` + interpreters + `|source|eval|\.)(?:\s|$|[;|&)])`

// stdinRunner is a pipeline stage that runs what it reads from stdin as code: an
// interpreter without a script argument ("sh", "bash -s --", "python3 -"), or
// source (or .) of /dev/stdin.
const stdinRunner = `\|\s*` + wrappers + `(?:` + interpreters + `(?:\s+-[a-zA-Z]*)*(?:\s+--(?:\s[^|;&\n]*)?)?|(?:source|\.)\s+/dev/stdin)\s*(?:$|[;|&)\n])`

// cmdStart is where a command word can begin: the start, after a command
// separator, a pipe, an opening parenthesis or brace, a command substitution or a
// keyword, or just inside the quoted script of sh -c.
const cmdStart = `(?:^|[;&|({\x60\n]|\$\(|<\(|\b(?:then|do|else|if|while|until)\s|-c\s+['"])\s*`

// decoder finds a program that turns encoded text back into what it stands for.
var decoder = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(?:(base64|base32)\s+(?:-\S+\s+)*(?:-[a-z]*d[a-z]*|--decode)\b|(basenc)\b[^|;&\n]*\s(?:-d|--decode)\b|` +
		`(xxd)\s+(?:-\S+\s+)*-[a-z]*r|(openssl)\s+(?:enc|base64|aes-\S+|des\S*)\b[^|;&\n]*\s-d\b|(uudecode)\b|` +
		`(printf)\s+['"]?[^'"|;&\n]*\\(?:x[0-9a-f]{2}|[0-3][0-7]{2}))`)
})

var (
	// pipeRunner is a later stage of a pipeline that runs what it reads.
	pipeRunner = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(stdinRunner) })
	// substitution is a runner given the output of a command: sh -c "$(...)",
	// bash <(...), eval `...`, python3 -c "$(...)".
	substitution = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(cmdStart + runner + `[^\n;&|]*(?:\$\(|<\(|\x60)`) })
	// redirect is where a decoder's output is written.
	redirect = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[^|;&\n]*?>\s*([^\s;&|<>()]+)`) })
)

// A download piped to, or substituted into, a runner.
var (
	fetchPipe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)\b(curl|wget)\b[^\n;&]*` + stdinRunner) })
	fetchSubs = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)` + cmdStart + runner + `[^\n;&|]*(?:\$\(|<\(|\x60)\s*(curl|wget)\b`)
	})
)

// evalWord is eval used as a command.
var evalWord = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(cmdStart + `(?:(?:sudo|doas|builtin|command)\s+)*eval(?:\s|$)`)
})

// Interpreter code (python -c, perl -e, node -e, php -r) that decodes text and
// evaluates the result.
var (
	scriptEval = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\b(?:exec|eval|system|compile|popen|Function)\s*\(|\bsubprocess\b`)
	})
	scriptDecode = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b(?:b64decode|b32decode|b16decode|a85decode|decode_base64|base64_decode|decodebytes|unhexlify|fromhex|atob|hex2bin)\b|\bpack\s*\(\s*['"]H|Buffer\.from\([^)]*['"](?:base64|hex)['"]|codecs\.decode\([^)]*rot`)
	})
)

// escape is a hex, octal or unicode escape; escapes of printable characters
// spell text in a way a reader cannot see.
var escape = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\\(x[0-9a-fA-F]{2}|[0-3][0-7]{2}|u[0-9a-fA-F]{4})`) })

// encodedRun is a run of base64 (or base32, or URL-safe base64) characters.
var encodedRun = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[A-Za-z0-9+/_-]{100,}={0,2}`) })

// ShellWarnings returns the warnings for a shell command's approval prompt, each
// one plain sentence, in a fixed order, none repeated; nil when none applies. It
// is pure and safe for concurrent use.
func ShellWarnings(command string) []string {
	var out []string
	if name := decodesAndRuns(command); name != "" {
		out = append(out, fmt.Sprintf("This command decodes hidden content (%s) and runs it: what it runs is not what you read here.", name))
	} else if scriptEval().MatchString(command) && scriptDecode().MatchString(command) {
		out = append(out, "This command's script decodes hidden content and evaluates it: what it runs is not what you read here.")
	}
	if m := fetchPipe().FindStringSubmatch(command); m != nil {
		out = append(out, fmt.Sprintf("This command downloads a script and runs it at once (%s piped to a shell or interpreter): what it runs is not shown here.", strings.ToLower(m[1])))
	} else if m := fetchSubs().FindStringSubmatch(command); m != nil {
		out = append(out, fmt.Sprintf("This command downloads a script and runs it at once (%s output given to a shell or interpreter): what it runs is not shown here.", strings.ToLower(m[1])))
	}
	if evalWord().MatchString(command) {
		out = append(out, "This command uses eval, which runs text put together while it runs: check what it builds.")
	}
	if e := printableEscape(command); e != "" {
		out = append(out, fmt.Sprintf("This command spells characters as hex or octal escapes (%s), which hides what they say.", e))
	}
	if n := longestEncoded(command); n > 0 {
		out = append(out, fmt.Sprintf("This command holds a long run of encoded-looking text (%d characters), which may hide what it does.", n))
	}
	return out
}

// maxDecoders bounds the decoders decodesAndRuns looks at, so a command made of
// thousands of them costs no more than a few.
const maxDecoders = 16

// decodesAndRuns names the first decoder in command whose output is run: piped to
// a shell or interpreter reading stdin, given to one through a command
// substitution, or written to a file the command then runs (or makes
// executable). It returns "" when there is none.
func decodesAndRuns(command string) string {
	substituted := substitution().MatchString(command)
	checked := map[string]bool{} // files a decoder's output went to
	for _, m := range decoder().FindAllStringSubmatchIndex(command, maxDecoders) {
		name := ""
		for g := 2; g+1 < len(m); g += 2 {
			if m[g] >= 0 {
				name = strings.ToLower(command[m[g]:m[g+1]])
				break
			}
		}
		rest := command[m[0]:]
		stage := rest // the decoder's pipeline: up to the next ;, &, || or line
		if i := strings.IndexAny(rest, ";&\n"); i >= 0 {
			stage = rest[:i]
		}
		if i := strings.Index(stage, "||"); i >= 0 {
			stage = stage[:i]
		}
		if substituted || pipeRunner().MatchString(stage) {
			return name
		}
		if r := redirect().FindStringSubmatch(stage); r != nil && !checked[r[1]] {
			checked[r[1]] = true // a later decode into the same file is run, or not, as this one is
			file := regexp.QuoteMeta(strings.Trim(r[1], `'"`))
			ran := regexp.MustCompile(cmdStart + runner + `\s*(?:-\S+\s+)*['"]?` + file + `|chmod\s[^\n;&|]*` + file + `|` + cmdStart + `(?:\./)?` + file + `(?:\s|$|[;&|)])`)
			if ran.MatchString(rest[len(r[0]):]) {
				return name
			}
		}
	}
	return ""
}

// printableEscape is the first escape in s that stands for a printable ASCII
// character (a letter, digit, punctuation or space), or "". Escapes of control
// characters (\x1b for colours, \000, \x00) have honest uses and do not count.
func printableEscape(s string) string {
	for _, m := range escape().FindAllStringSubmatchIndex(s, -1) {
		if bs := backslashesBefore(s, m[0]); bs%2 == 1 {
			continue // the backslash is itself escaped: \\x41 is literal text
		}
		code := s[m[2]:m[3]]
		var v int
		switch code[0] {
		case 'x':
			fmt.Sscanf(code[1:], "%x", &v)
		case 'u':
			fmt.Sscanf(code[1:], "%x", &v)
		default:
			fmt.Sscanf(code, "%o", &v)
		}
		if v >= 0x20 && v < 0x7f {
			return s[m[0]:m[1]]
		}
	}
	return ""
}

// backslashesBefore counts the backslashes right before s[i].
func backslashesBefore(s string, i int) int {
	n := 0
	for i > 0 && s[i-1] == '\\' {
		n++
		i--
	}
	return n
}

// longestEncoded is the length of the longest run of at least 100 base64
// characters in s that mixes upper case, lower case and digits (so a long hex
// hash, a path or a word repeated does not count), or 0.
func longestEncoded(s string) int {
	best := 0
	for _, m := range encodedRun().FindAllString(s, -1) {
		upper, lower, digit := false, false, false
		for _, c := range m {
			switch {
			case c >= 'A' && c <= 'Z':
				upper = true
			case c >= 'a' && c <= 'z':
				lower = true
			case c >= '0' && c <= '9':
				digit = true
			}
		}
		if upper && lower && digit && !strings.Contains(m, "//") {
			best = max(best, len(m))
		}
	}
	return best
}
