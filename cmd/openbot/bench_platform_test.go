package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"openbot/adapters/slack/slacktest"
	"openbot/adapters/telegram/telegramtest"
	"openbot/agents/openaitest"
	"openbot/config"
	"openbot/core"
	"openbot/internal/waitctx"
	"openbot/store/bolt"
)

// Bench identities of the fake platforms.
const (
	benchTgToken     = "100000:BENCH"
	benchSlackSecret = "bench-signing-secret"
)

// benchEventHeader numbers a bench event's HTTP request, so the bench notes when
// it reached openbot's handler.
const benchEventHeader = "X-Openbot-Bench-Event"

// benchMarker finds the message number in what the model was sent.
var benchMarker = regexp.MustCompile(`bench-(\d+)`)

// platformBench is what BenchmarkPlatform was asked to do.
type platformBench struct {
	platform    string
	rate, burst int
	duration    time.Duration
	parallel    int           // the bot's max_parallel_threads (at least 1)
	settle      time.Duration // wait after the run before the last RSS reading (0: none)
	heapProfile string        // pprof heap profile path, written when the last message reached the model ("" : none)
	cpuProfile  string        // pprof CPU profile path, of the whole process while sending ("": none)
	dir         string
}

// platformFigures are the results of one paced run.
type platformFigures struct {
	sent, answered int
	p50, p99       time.Duration
	throughput     float64      // model requests per second over the run
	polled         float64      // Telegram: updates/s the poller stored from a burst, batched (0: not measured)
	maxBacklog     int          // most updates the fake held unconfirmed (Telegram)
	endBacklog     int          // updates unconfirmed when the last was sent
	behind         int          // messages sent but not yet at the model when the last was sent
	store          *storeWindow // the store's group commits while sending (nil: not a bbolt store)
	// cpu is the process's user and system CPU time from the first message sent
	// to the last at the model (cpuOK false: not readable on this system).
	cpu         time.Duration
	cpuOK       bool
	idleRSS     string   // RSS once ready, before the first message
	burstRSS    string   // RSS when the last message reached the model
	settledRSS  string   // RSS settle after that ("" without settle)
	heapInUse   uint64   // live heap bytes when the last message reached the model (after a GC)
	settledHeap uint64   // the same after settle
	peakGo      goMemory // the Go runtime's memory at its largest during the run (sampled)
	burstGo     goMemory // the Go runtime's memory when burstRSS was read
	settledGo   goMemory // the same after settle
}

// benchPlatform is BenchmarkPlatform: it runs openbot's
// real wiring (the same code as `openbot serve`) in this process against the
// project's fake platform (telegramtest polling, or slacktest with Events API
// requests signed and POSTed to the HTTP listener) and fake model server
// (openaitest), sends one message every second/rate for duration, each in its own
// conversation, and prints the p50/p99 latency from the event (the update queued
// at the fake; the POST's arrival at openbot's HTTP handler) to the model request
// it causes (its arrival at the fake model's handler: headers read, body not yet), the throughput, and
// this process's RSS (fakes included). For Telegram it first measures how many
// updates per second polling stores from a burst, batched (one transaction and one
// offset save per getUpdates answer) and one by one. With settle it also reports the
// RSS and live heap once idle, after the burst and settle later (memory flat under
// bursts, DESIGN.md §9), and with heapProfile it writes a pprof heap profile of the
// burst. DESIGN.md §7.
func benchPlatform(ctx context.Context, b platformBench, stdout io.Writer) (f platformFigures, err error) {
	platform, rate, duration, burst, dir := b.platform, b.rate, b.duration, b.burst, b.dir
	if platform != "telegram" && platform != "slack" {
		return f, fmt.Errorf("platform %q is not telegram or slack", platform)
	}
	for _, c := range []struct {
		bad  bool
		flag string
		want string
	}{
		{rate <= 0, "-rate", fmt.Sprintf("must be positive, got %d", rate)},
		{duration <= 0, "-duration", fmt.Sprintf("must be positive, got %s", duration)},
		{b.parallel <= 0, "-max-parallel", fmt.Sprintf("must be positive, got %d", b.parallel)},
		{b.settle < 0, "-settle", fmt.Sprintf("must not be negative, got %s", b.settle)},
	} {
		if c.bad {
			return f, fmt.Errorf("%s %s", c.flag, c.want)
		}
	}
	var polled, single float64
	if platform == "telegram" && burst > 0 {
		if polled, err = pollingRate(ctx, filepath.Join(dir, "burst-batched.db"), burst, true); err != nil {
			return f, err
		}
		if single, err = pollingRate(ctx, filepath.Join(dir, "burst-single.db"), burst, false); err != nil {
			return f, err
		}
		fmt.Fprintf(stdout, "telegram polling:  %8.0f updates/s batched (one transaction and one offset save per getUpdates answer)\n", polled)
		fmt.Fprintf(stdout, "                   %8.0f updates/s one by one (one transaction per update)  (%d updates, 100 chats, fsync on)\n", single, burst)
	}
	sp50, sp99, err := syncLatency(ctx, dir)
	if err != nil {
		return f, err
	}
	fmt.Fprintf(stdout, "disk:              a 4 KiB write and fdatasync after %s idle: p50 %.2f ms, p99 %.2f ms (%d syncs; a commit syncs twice)\n",
		syncGap, ms(sp50), ms(sp99), diskSyncs)
	if f, err = pacedPlatform(ctx, b); err != nil {
		return f, err
	}
	f.polled = polled
	fmt.Fprintf(stdout, "%s at %d msg/s for %s (max_parallel_threads %d): event -> model request p50 %6.2f ms, p99 %6.2f ms; %d/%d answered, %.0f msg/s\n",
		platform, rate, duration, b.parallel, ms(f.p50), ms(f.p99), f.answered, f.sent, f.throughput)
	if platform == "telegram" {
		fmt.Fprintf(stdout, "telegram backlog:  at most %d updates unconfirmed at the fake, %d when the last was sent\n", f.maxBacklog, f.endBacklog)
	}
	fmt.Fprintf(stdout, "behind:            %d %s not yet at the model when the last was sent (intake and runs)\n", f.behind, plural(f.behind, "message", "messages"))
	if w := f.store; w != nil && w.stats.Commits > 0 {
		st := w.stats
		fmt.Fprintf(stdout, "store:             %d commits carrying %d writes while sending (%.1f writes a message, %.2f a commit); the writer busy %.0f%% of the time, %.2f ms a commit\n",
			st.Commits, st.Writes, float64(st.Writes)/float64(f.sent), float64(st.Writes)/float64(st.Commits),
			100*st.Busy.Seconds()/w.wall.Seconds(), ms(st.Busy/time.Duration(st.Commits)))
		p50, p99, longest, slow := w.commitTimes(slowCommit)
		fmt.Fprintf(stdout, "                   a commit (fsyncs included) p50 %.2f ms, p99 %.2f ms, longest %.2f ms; %d over %s (an event arriving then waits for it)\n",
			ms(p50), ms(p99), ms(longest), slow, slowCommit)
	}
	if f.cpuOK && f.answered > 0 {
		fmt.Fprintf(stdout, "cpu:               %.3f ms a message (user+sys %.2f s of this process, fakes and load generator included, from the first message sent to the last at the model, over %d answered)\n",
			ms(f.cpu)/float64(f.answered), f.cpu.Seconds(), f.answered)
	}
	rss, peak := memRSS()
	fmt.Fprintf(stdout, "RSS:               %s now, %s peak (this process: openbot, fakes and load generator)\n", rss, peak)
	fmt.Fprintf(stdout, "memory:            RSS %s idle, %s after %d conversations (live heap %s)\n", f.idleRSS, f.burstRSS, f.sent, heapMiB(f.heapInUse))
	fmt.Fprintf(stdout, "                   peak during the run: %s\n", f.peakGo)
	fmt.Fprintf(stdout, "                   after the run:       %s\n", f.burstGo)
	if b.settle > 0 {
		fmt.Fprintf(stdout, "settled:           RSS %s after %s idle (live heap %s)\n", f.settledRSS, b.settle, heapMiB(f.settledHeap))
		fmt.Fprintf(stdout, "                   %s\n", f.settledGo)
		if f.heapInUse > f.settledHeap && f.sent > 0 {
			fmt.Fprintf(stdout, "                   live heap per conversation of the run: %d bytes (what it held after the run less what it holds settled, per conversation)\n",
				(f.heapInUse-f.settledHeap)/uint64(f.sent))
		}
	}
	if b.cpuProfile != "" {
		fmt.Fprintf(stdout, "cpu profile:       %s (go tool pprof; the whole process while sending)\n", b.cpuProfile)
	}
	if b.heapProfile != "" {
		fmt.Fprintf(stdout, "heap profile:      %s (go tool pprof -sample_index=inuse_space)\n", b.heapProfile)
	}
	return f, nil
}

// pacedPlatform runs serve over a generated config against the fakes and sends
// rate messages per second for duration.
func pacedPlatform(ctx context.Context, b platformBench) (platformFigures, error) {
	platform, rate, duration, dir := b.platform, b.rate, b.duration, b.dir
	var f platformFigures
	llm, err := openaitest.Start()
	if err != nil {
		return f, err
	}
	defer llm.Close()
	var (
		mu      sync.Mutex
		asked   = map[int]time.Time{}
		arrived = map[int]time.Time{} // Slack: the event's arrival at openbot's HTTP handler
		changed = make(chan struct{}, 1)
	)
	llm.Handle(func(r openaitest.Request) openaitest.Reply {
		now := r.Arrived // the request's first bytes reached the fake model
		if m := benchMarker.FindStringSubmatch(openaitest.LastUserText(r)); m != nil {
			n, _ := strconv.Atoi(m[1])
			mu.Lock()
			if _, ok := asked[n]; !ok {
				asked[n] = now
			}
			mu.Unlock()
			select {
			case changed <- struct{}{}:
			default:
			}
		}
		return openaitest.Text("noted")
	})

	var (
		account string
		send    func(ctx context.Context, addr string, n int) error
		backlog func() int
		forget  = llm.Forget // drops what the fakes recorded (not openbot's memory)
	)
	switch platform {
	case "telegram":
		fake := telegramtest.NewServer(telegramtest.Bot{Token: benchTgToken, ID: 100000, Username: "bench_bot", Name: "Bench"})
		defer fake.Close()
		account = fmt.Sprintf("telegram:\n  - {name: bench, bot: chief_of_staff, token: %q, api_endpoint: %q, dm_policy: open}\n", benchTgToken, fake.URL())
		send = func(_ context.Context, _ string, n int) error {
			_, err := fake.PushUpdate(benchTgToken, tgBenchUpdate(n, int64(1_000_000+n)))
			return err
		}
		backlog = func() int { return fake.Pending(benchTgToken) }
		forget = func() { llm.Forget(); fake.Forget() }
	case "slack":
		fake := slacktest.New(slacktest.Options{BotToken: "xoxb-bench"})
		defer fake.Close()
		account = fmt.Sprintf("slack:\n  - {name: bench, bot: chief_of_staff, mode: http, bot_token: xoxb-bench, signing_secret: %q, api_url: %q}\n", benchSlackSecret, fake.APIURL())
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
		send = func(ctx context.Context, addr string, n int) error { return postSlackEvent(ctx, hc, addr, n) }
		backlog = func() int { return 0 }
		forget = func() { llm.Forget(); fake.Forget() }
	}
	cfg, err := benchConfig(dir, llm.URL(), account, b.parallel)
	if err != nil {
		return f, err
	}
	addrs := make(chan string, 1)
	var bs *bolt.Store // set by serve before it listens
	a := &app{cfg: cfg, stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard,
		log: slog.New(slog.DiscardHandler), onListen: func(addr string) { addrs <- addr },
		onStore: func(st core.Store) { bs, _ = st.(*bolt.Store) },
		onRequest: func(r *http.Request) {
			if n, err := strconv.Atoi(r.Header.Get(benchEventHeader)); err == nil {
				now := time.Now()
				mu.Lock()
				arrived[n] = now
				mu.Unlock()
			}
		}}
	a.memLimit = serveMemoryLimit(os.LookupEnv, a.log) // serve's soft memory limit, GOMEMLIMIT respected
	sctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() { done <- a.serve(sctx) }()
	defer func() {
		stop()
		<-done
	}()
	var addr string
	select {
	case addr = <-addrs:
	case code := <-done:
		done <- code
		return f, fmt.Errorf("serve exited %d before listening", code)
	case <-ctx.Done():
		return f, ctx.Err()
	}
	if err := waitReady(ctx, addr); err != nil {
		return f, err
	}
	// The fakes record every request; forget them often so the memory figures are
	// openbot's (and the load generator's), not the fakes' records.
	fctx, fstop := context.WithCancel(ctx)
	fdone := make(chan struct{})
	go func() {
		defer close(fdone)
		waitctx.Every(fctx, 100*time.Millisecond, forget)
	}()
	defer func() {
		fstop()
		<-fdone
	}()
	runtime.GC()
	f.idleRSS, _ = memRSS()
	stopPeak := samplePeak(ctx)
	defer stopPeak()

	n := max(1, int(duration.Seconds()*float64(rate)))
	f.sent = n
	stopCPU, err := startCPUProfile(b.cpuProfile)
	if err != nil {
		return f, err
	}
	defer stopCPU()
	win := startStoreWindow(bs)
	cpu0, cpuOK := processCPU()
	sent := make([]time.Time, n)
	var (
		wg   sync.WaitGroup
		errs = make(chan error, n)
	)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for i := range n {
		select {
		case <-ctx.Done():
			tick.Stop()
			wg.Wait()
			return f, ctx.Err()
		case <-tick.C:
		}
		f.maxBacklog = max(f.maxBacklog, backlog())
		sent[i] = time.Now()
		wg.Add(1)
		go func() { // one goroutine per event, as the platform would send them
			defer wg.Done()
			if err := send(ctx, addr, i); err != nil {
				errs <- err
			}
		}()
	}
	tick.Stop()
	stopCPU()
	f.store = win.end()
	f.endBacklog = backlog()
	mu.Lock()
	f.behind = n - len(asked)
	mu.Unlock()
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return f, err
	}
	// Wait for the model requests (bounded: a lost message shows as unanswered);
	// a burst gets 50 ms more per message, so its memory is measured once drained.
	deadline := time.NewTimer(30*time.Second + time.Duration(n)*50*time.Millisecond)
	defer deadline.Stop()
	for {
		mu.Lock()
		got := len(asked)
		mu.Unlock()
		if got >= n {
			break
		}
		select {
		case <-changed:
			continue
		case <-deadline.C:
		case <-ctx.Done():
			return f, ctx.Err()
		}
		break
	}
	if cpu1, ok := processCPU(); ok && cpuOK {
		f.cpu, f.cpuOK = cpu1-cpu0, true
	}
	mu.Lock()
	defer mu.Unlock()
	var lat []time.Duration
	var last time.Time
	for i, at := range asked {
		if i < 0 || i >= n {
			continue
		}
		from := sent[i]
		if t, ok := arrived[i]; ok {
			from = t
		}
		lat = append(lat, at.Sub(from))
		if at.After(last) {
			last = at
		}
	}
	f.answered = len(lat)
	f.peakGo = stopPeak()
	if len(lat) == 0 {
		return f, errors.New("no message reached the model")
	}
	if err := burstMemory(ctx, b, &f); err != nil {
		return f, err
	}
	f.p50, f.p99 = percentiles(lat)
	f.throughput = float64(len(lat)) / last.Sub(sent[0]).Seconds()
	return f, nil
}

// benchConfig writes and loads a config with one bot (no tools, parallel threads at
// once) talking to the fake model at llmURL, the store under dir, and the account
// YAML given.
func benchConfig(dir, llmURL, account string, parallel int) (*config.Config, error) {
	text := fmt.Sprintf(`http:
  listen: 127.0.0.1:0
store:
  path: %q
limits:
  max_concurrent_runs: %d
  run_timeout: 1m
llm:
  default:
    base_url: %q
    api_key: ""
    model: bench
default_bot: chief_of_staff
workspace: %q
sandbox: none
bots:
  - handle: chief_of_staff
    name: Chief of Staff
    description: "Answers."
    instructions: "Answer in one word."
    tools: []
    max_parallel_threads: %d
%s`, filepath.Join(dir, "paced", "openbot.db"), max(64, parallel), llmURL, filepath.Join(dir, "paced", "workspace"), parallel, account)
	path := filepath.Join(dir, "bench-config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return nil, err
	}
	return config.Load(path, func(string) (string, bool) { return "", false })
}

// waitReady polls /healthz until it answers 200 (every account's ingress is live).
func waitReady(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("openbot never became ready: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// tgBenchUpdate is a private text message numbered n from user (its own chat).
func tgBenchUpdate(n int, user int64) []byte {
	return fmt.Appendf(nil, `{"message":{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"U%d"},"chat":{"id":%d,"type":"private"},"date":%d,"text":"please look at bench-%d"}}`,
		n+1, user, user, user, time.Now().Unix(), n)
}

// postSlackEvent POSTs a signed app_mention, numbered n and starting its own
// thread, to the Events API endpoint and checks it was accepted.
func postSlackEvent(ctx context.Context, hc *http.Client, addr string, n int) error {
	ts := fmt.Sprintf("1767225600.%06d", n)
	body := fmt.Appendf(nil, `{"token":"x","team_id":%q,"api_app_id":%q,"type":"event_callback","event_id":"EvBENCH%d","event_time":1767225600,`+
		`"event":{"type":"app_mention","user":"U0BENCH%d","text":"<@%s> please look at bench-%d","ts":%q,"channel":"C0BENCH01","event_ts":%q},`+
		`"authorizations":[{"team_id":%q,"user_id":%q,"is_bot":true}]}`,
		slacktest.DefaultTeam, slacktest.DefaultAppID, n, n%100, slacktest.DefaultBotUser, n, ts, ts, slacktest.DefaultTeam, slacktest.DefaultBotUser)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/slack/bench/events", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(benchEventHeader, strconv.Itoa(n))
	slacktest.Sign(req.Header, body, benchSlackSecret, time.Now())
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("slack event %d: HTTP %d %s", n, resp.StatusCode, b)
	}
	return nil
}

// memRSS reads this process's RSS now and its peak from /proc/self/status
// (Linux; "n/a" elsewhere). The peak is VmHWM, or the highest RSS any memRSS
// call has read when that is larger: the kernel updates VmHWM lazily, so a
// figure read earlier could otherwise exceed the "peak" printed after it.
func memRSS() (now, peak string) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "n/a", "n/a"
	}
	return statusRSS(string(b), &rssSeen)
}

// rssSeen is the highest VmRSS memRSS has read, in kB.
var rssSeen atomic.Int64

// statusRSS is memRSS over the text of a status file, seen the highest VmRSS
// read so far (updated).
func statusRSS(status string, seen *atomic.Int64) (now, peak string) {
	now, peak = "n/a", "n/a"
	var anon, file string
	var rssKB, hwmKB int64 = -1, -1
	for _, line := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "VmRSS":
			now = v
			rssKB = kB(v)
		case "VmHWM":
			hwmKB = kB(v)
		case "RssAnon":
			anon = v
		case "RssFile":
			file = v
		}
	}
	if rssKB >= 0 {
		for cur := seen.Load(); rssKB > cur && !seen.CompareAndSwap(cur, rssKB); cur = seen.Load() {
		}
	}
	if hwmKB >= 0 {
		peak = fmt.Sprintf("%d kB", max(hwmKB, seen.Load()))
	}
	if anon != "" && file != "" {
		now += fmt.Sprintf(" (anonymous %s, file-backed %s: the store's memory map and the binary)", anon, file)
	}
	return now, peak
}

// kB is the number of a status value such as "38184 kB"; -1 when it has none.
func kB(v string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// slowCommit is the commit duration the bench counts as slow: 5 ms, the whole
// budget of the event -> model request overhead at its p99.
const slowCommit = 5 * time.Millisecond

// storeWindow is what the bbolt store's single writer did over an interval
// (bolt.Store.CommitStats): its commits, the writes they carried and the time
// it spent on them, against the interval's wall time, and each commit's
// duration (its transaction's functions and its fsyncs): what an ingest
// arriving during a commit waits for.
type storeWindow struct {
	bs    *bolt.Store
	start time.Time
	from  bolt.CommitStats
	stats bolt.CommitStats
	wall  time.Duration

	mu   sync.Mutex
	durs []time.Duration // each commit's, in the window; at most maxWindowCommits
}

// maxWindowCommits bounds the commit durations a window keeps (8 bytes each).
const maxWindowCommits = 1 << 20

// startStoreWindow starts a window on bs; nil (not a bbolt store) gives nil. It
// takes the store's commit observer (bolt.Store.OnCommit) until end: serve's
// metrics see no commit of the window, which nothing in the bench reads.
func startStoreWindow(bs *bolt.Store) *storeWindow {
	if bs == nil {
		return nil
	}
	w := &storeWindow{bs: bs, start: time.Now(), from: bs.CommitStats()}
	bs.OnCommit(func(_ int, d time.Duration) {
		w.mu.Lock()
		if len(w.durs) < maxWindowCommits {
			w.durs = append(w.durs, d)
		}
		w.mu.Unlock()
	})
	return w
}

// end closes the window and returns it (nil for nil).
func (w *storeWindow) end() *storeWindow {
	if w == nil {
		return nil
	}
	w.bs.OnCommit(nil)
	to := w.bs.CommitStats()
	w.wall = time.Since(w.start)
	w.stats = bolt.CommitStats{Commits: to.Commits - w.from.Commits, Writes: to.Writes - w.from.Writes, Busy: to.Busy - w.from.Busy}
	return w
}

// commitTimes are the p50, p99 and longest of the window's commit durations
// and how many took over over; zeros for a window without commits.
func (w *storeWindow) commitTimes(over time.Duration) (p50, p99, longest time.Duration, slow int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.durs) == 0 {
		return 0, 0, 0, 0
	}
	p50, p99 = percentiles(w.durs)
	for _, d := range w.durs {
		if d > over {
			slow++
		}
	}
	return p50, p99, w.durs[len(w.durs)-1], slow
}
