package feishu

import (
	"testing"
)

func TestFileAttachmentsOfMessageTypes(t *testing.T) {
	cases := []struct {
		typ, content string
		isFile       bool
		want         []string // name|kind|ref
	}{
		{"image", `{"image_key":"img_v3_0123456789abcdef"}`, true, []string{"image-456789abcdef.png|image|om1|image|img_v3_0123456789abcdef"}},
		{"file", `{"file_key":"file_v3_k","file_name":"report.pdf"}`, true, []string{"report.pdf|document|om1|file|file_v3_k"}},
		{"audio", `{"file_key":"file_v3_a","duration":2000}`, true, []string{"voice-file_v3_a.opus|voice|om1|file|file_v3_a"}},
		{"media", `{"file_key":"file_v3_m","image_key":"img_x","file_name":"clip.mp4"}`, true, []string{"clip.mp4|video|om1|file|file_v3_m"}},
		{"post", `{"title":"","content":[[{"tag":"text","text":"see"},{"tag":"img","image_key":"img_p"}]]}`, false, []string{"image-img_p.png|image|om1|image|img_p"}},
		{"text", `{"text":"hi"}`, false, nil},
		{"sticker", `{"file_key":"x"}`, false, nil},
	}
	for _, c := range cases {
		atts, isFile := fileAttachments(c.typ, c.content, "om1")
		if isFile != c.isFile || len(atts) != len(c.want) {
			t.Errorf("%s: isFile %v, %d attachments; want %v, %d", c.typ, isFile, len(atts), c.isFile, len(c.want))
			continue
		}
		for i, a := range atts {
			if got := a.Name + "|" + a.Kind + "|" + a.Ref; got != c.want[i] {
				t.Errorf("%s: attachment %q, want %q", c.typ, got, c.want[i])
			}
		}
	}
}
