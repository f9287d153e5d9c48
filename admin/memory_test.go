package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"openbot/admin"
	"openbot/core"
	"openbot/internal/runtest"
)

func send(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return runtest.Do(t, req)
}

// TestMemoryEndpoints: a bot's memories are listed with their source run and
// without vectors; an edit makes the memory the operator's and drops its
// embedding; a delete removes it; both are in the activity log.
func TestMemoryEndpoints(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	var m1, m2 core.Memory
	if err := st.Update(ctx, func(tx core.Tx) error {
		var err error
		if m1, err = tx.PutMemory(core.Memory{Bot: "engineer", Text: "squash merges", Source: core.MemorySourceReflection, Run: 7,
			Embedding: []float32{1, 0}, EmbeddingModel: "default/e"}); err != nil {
			return err
		}
		m2, err = tx.PutMemory(core.Memory{Bot: "engineer", Text: "wait for CI", Source: core.MemorySourceTool, Run: 8})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	hs := serveAPI(t, admin.Options{Store: st})
	var list pageOf[admin.MemoryView]
	getJSON(t, hs.URL+"/api/v1/bots/engineer/memories", http.StatusOK, &list)
	if len(list.Items) != 2 || list.Items[0].Run != 7 || list.Items[0].Source != "reflection" || list.Items[0].EmbeddingModel != "default/e" {
		t.Fatalf("list = %+v", list.Items)
	}
	var none pageOf[admin.MemoryView]
	getJSON(t, hs.URL+"/api/v1/bots/qa/memories", http.StatusOK, &none)
	if len(none.Items) != 0 {
		t.Errorf("qa's memories = %+v", none.Items)
	}
	if code, body := send(t, http.MethodGet, hs.URL+"/api/v1/memories/1", ""); code != 200 || strings.Contains(body, "embedding\"") || !strings.Contains(body, "squash merges") {
		t.Errorf("GET memory = %d %s", code, body)
	}
	if code, _ := send(t, http.MethodPut, hs.URL+"/api/v1/memories/1", `{"text":"  "}`); code != http.StatusBadRequest {
		t.Errorf("empty edit = %d, want 400", code)
	}
	if code, _ := send(t, http.MethodPut, hs.URL+"/api/v1/memories/1", `{"text":"`+strings.Repeat("x", core.MaxMemoryChars+1)+`"}`); code != http.StatusBadRequest {
		t.Errorf("long edit = %d, want 400", code)
	}
	if code, body := send(t, http.MethodPut, hs.URL+"/api/v1/memories/1", `{"text":"rebase merges"}`); code != 200 || !strings.Contains(body, "rebase merges") {
		t.Errorf("edit = %d %s", code, body)
	}
	if code, _ := send(t, http.MethodDelete, hs.URL+"/api/v1/memories/2", ""); code != 200 {
		t.Errorf("delete = %d", code)
	}
	if code, _ := send(t, http.MethodDelete, hs.URL+"/api/v1/memories/2", ""); code != 404 {
		t.Errorf("second delete = %d, want 404", code)
	}
	if code, _ := send(t, http.MethodPut, hs.URL+"/api/v1/memories/99", `{"text":"x"}`); code != 404 {
		t.Errorf("edit of none = %d, want 404", code)
	}
	_ = st.View(ctx, func(tx core.ReadTx) error {
		ms, _ := tx.Memories("engineer")
		if len(ms) != 1 || ms[0].ID != m1.ID || ms[0].Text != "rebase merges" || ms[0].Source != core.MemorySourceOperator || ms[0].Run != 0 || ms[0].Embedding != nil {
			t.Errorf("memories after edit and delete = %+v", ms)
		}
		acts, _ := tx.Activities(0, 0)
		var events []string
		for _, a := range acts {
			events = append(events, a.Event+": "+a.Summary)
		}
		got := strings.Join(events, "\n")
		for _, want := range []string{"memory.updated: @engineer memory #1 updated by operator", "memory.deleted: @engineer memory #2 deleted by operator"} {
			if !strings.Contains(got, want) {
				t.Errorf("activity lacks %q:\n%s", want, got)
			}
		}
		return nil
	})
	_ = m2
}
