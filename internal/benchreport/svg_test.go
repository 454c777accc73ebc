package benchreport

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wellFormed decodes every token of doc and returns the element names.
func wellFormed(t *testing.T, doc []byte) map[string]int {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	names := map[string]int{}
	depth := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "not well-formed XML:\n%s", doc)
		switch el := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				assert.Equal(t, "svg", el.Name.Local, "root element")
				assert.Equal(t, "http://www.w3.org/2000/svg", el.Name.Space)
			}
			depth++
			names[el.Name.Local]++
		case xml.EndElement:
			depth--
		}
	}
	assert.Zero(t, depth)
	return names
}

func TestPlotSVGIsWellFormed(t *testing.T) {
	p := Plot{
		Title: `latency <p99> & "friends"`,
		X:     Axis{Label: "latency", Log: true, Format: durAxis},
		Y:     Axis{Label: "fraction", Min: 0, Max: 1},
		Series: []Series{
			{Name: "watch & poll", X: []float64{1e5, 2e5, 0, -1, math.NaN(), 3e6}, Y: []float64{0.25, 0.5, 0.6, 0.7, 0.8, 1}, Step: true},
			{Name: "markers", X: []float64{1e6, 1e7}, Y: []float64{0.5, 1}, Markers: true, Dashed: true},
		},
		Refs: []Ref{{Label: "goal <10 ms>", Value: 1e7, Vertical: true}, {Label: "half", Value: 0.5}},
	}
	doc := p.SVG()
	names := wellFormed(t, doc)
	assert.Equal(t, 2, names["polyline"])
	assert.Equal(t, 3, names["circle"], "two markers, and a dot in the legend")
	s := string(doc)
	assert.Contains(t, s, "watch &amp; poll")
	assert.Contains(t, s, "latency &lt;p99&gt; &amp; &#34;friends&#34;")
	assert.Contains(t, s, "100 µs", "log axis ticks at decades")
	assert.Contains(t, s, "10 ms")
	assert.NotContains(t, s, "NaN")
	assert.NotContains(t, s, "Inf")
}

func TestPlotSVGEdgeCases(t *testing.T) {
	for name, p := range map[string]Plot{
		"empty":            {Title: "nothing"},
		"one point":        {Series: []Series{{Name: "a", X: []float64{5}, Y: []float64{5}}}},
		"log without data": {X: Axis{Log: true}, Y: Axis{Log: true}, Series: []Series{{Name: "a", X: []float64{0}, Y: []float64{-1}}}},
		"linear":           {Series: []Series{{Name: "a", X: []float64{1e4, 1e5}, Y: []float64{3e6, 120e6}, Markers: true}}},
	} {
		t.Run(name, func(t *testing.T) {
			doc := p.SVG()
			wellFormed(t, doc)
			assert.False(t, strings.Contains(string(doc), "NaN"), "no NaN coordinates")
		})
	}
}

func TestNiceStep(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{{0.9, 1}, {1.2, 2}, {3, 5}, {7, 10}, {16, 20}, {0, 1}} {
		assert.Equal(t, tc.want, niceStep(tc.in), "niceStep(%v)", tc.in)
	}
}
