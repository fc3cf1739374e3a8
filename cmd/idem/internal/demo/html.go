package demo

import (
	"fmt"
	"html/template"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HTMLInfo describes the run for the report's heading.
type HTMLInfo struct {
	Seed    uint64
	Intents int
	Clients int
	Kills   int
}

// WriteHTML writes the reports as one self-contained HTML page (inline CSS
// and SVG, no script and no external asset): the modes side by side, each
// with a timeline of its intents (one row per intent, one mark per attempt
// coloured by what happened to it, the server kills as red lines, the
// intents applied twice highlighted), then the table WriteTable prints.
// Reports without a Timeline get the table only.
func WriteHTML(w io.Writer, reports []Report, info HTMLInfo) error {
	page := htmlPage{Info: info, Reports: reports}
	for _, r := range reports {
		if r.Timeline != nil {
			page.Modes = append(page.Modes, modeView(r))
		}
	}
	return reportTemplate.Execute(w, page)
}

type htmlPage struct {
	Info    HTMLInfo
	Reports []Report
	Modes   []htmlMode
}

type htmlMode struct {
	Mode          Mode
	Report        Report
	Width, Height int
	PlotHeight    int
	Seen          int // attempts the network saw
	Twice         int // intents applied more than once
	TwiceList     string
	Rows          []htmlRow
	Kills         []htmlKill
	Ticks         []htmlTick
}

type htmlRow struct {
	Y, H    float64
	Width   int
	Class   string // "", "dup" or "lost"
	Title   string
	Applied int
	Marks   []htmlMark
}

type htmlMark struct {
	X, Y, W, H float64
	Class      string
}

type htmlKill struct {
	X            float64
	PlotHeightOf int
	Title        string
}

type htmlTick struct {
	X     float64
	Y     int
	Label string
}

const (
	plotWidth = 420
	labelGap  = 18 // room for the time axis
)

// markClass names what happened to an attempt, for its colour.
func markClass(a Attempt) string {
	switch a.Fault {
	case FaultDrop:
		return "drop"
	case FaultDelay:
		return "delay"
	case FaultReset:
		return "reset"
	case FaultServerGone:
		return "down"
	}
	switch {
	case a.Replayed:
		return "replay"
	case a.Status == http.StatusConflict:
		return "inflight"
	case a.Status >= 200 && a.Status < 300:
		return "ok"
	default:
		return "error"
	}
}

var markWords = map[string]string{
	"ok": "answered", "replay": "replayed", "inflight": "409 in flight", "error": "error",
	"drop": "response dropped", "delay": "response too late", "reset": "connection reset", "down": "server down",
}

func modeView(r Report) htmlMode {
	tl := r.Timeline
	n := len(tl.Intents)
	rowH := 900.0 / float64(max(n, 1))
	rowH = min(max(rowH, 1), 8)
	total := max(tl.Duration, time.Millisecond)
	x := func(d time.Duration) float64 { return float64(d) / float64(total) * plotWidth }
	m := htmlMode{Mode: r.Mode, Report: r, Width: plotWidth}
	m.PlotHeight = int(rowH*float64(n)) + 1
	m.Height = m.PlotHeight + labelGap
	var twice []string
	for i, in := range tl.Intents {
		row := htmlRow{Y: float64(i) * rowH, H: rowH, Width: plotWidth, Applied: in.Applied}
		switch {
		case in.Applied > 1:
			row.Class = "dup"
			m.Twice++
			if len(twice) < 40 {
				twice = append(twice, strconv.Itoa(i+1))
			}
		case in.Applied == 0:
			row.Class = "lost"
		}
		var words []string
		for _, a := range in.Attempts {
			c := markClass(a)
			row.Marks = append(row.Marks, htmlMark{X: x(a.Start), Y: row.Y + rowH*0.1, W: max(x(a.End)-x(a.Start), 1.2), H: rowH * 0.8, Class: c})
			words = append(words, markWords[c])
		}
		m.Seen += len(in.Attempts) + in.Untraced
		more := ""
		if in.Untraced > 0 {
			more = fmt.Sprintf(" (+%d more)", in.Untraced)
		}
		row.Title = fmt.Sprintf("intent %d: %d attempt(s): %s%s; applied %d×", i+1, len(in.Attempts)+in.Untraced, strings.Join(words, ", "), more, in.Applied)
		m.Rows = append(m.Rows, row)
	}
	m.TwiceList = strings.Join(twice, ", ")
	if m.Twice > len(twice) {
		m.TwiceList += ", …"
	}
	for k, d := range tl.Kills {
		m.Kills = append(m.Kills, htmlKill{X: x(d), PlotHeightOf: m.PlotHeight, Title: fmt.Sprintf("server killed with SIGKILL (%d) at %.1f s", k+1, d.Seconds())})
	}
	step := max(time.Second, (total / 5).Round(time.Second))
	for d := time.Duration(0); d <= total; d += step {
		m.Ticks = append(m.Ticks, htmlTick{X: x(d), Y: m.Height - 4, Label: fmt.Sprintf("%ds", int(d.Seconds()))})
	}
	return m
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"yesno": yesNo,
	"f":     func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>idem demo: the incident, three ways</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #1d2330; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 0 0 4px; }
p.lead { margin: 0 0 16px; color: #4a5366; max-width: 70em; }
.modes { display: grid; grid-template-columns: repeat({{len .Modes}}, minmax(0, 1fr)); gap: 20px; margin-bottom: 24px; }
.mode { border: 1px solid #d5dae3; border-radius: 6px; padding: 12px; }
.mode.good { border-color: #2a9d3f; }
.mode.bad { border-color: #c53030; }
.facts { margin: 4px 0 8px; color: #4a5366; font-size: 13px; }
.facts b { color: #1d2330; }
svg { display: block; width: 100%; height: auto; background: #fafbfc; }
.ok { fill: #2a9d3f; } .replay { fill: #2b6cb0; } .inflight { fill: #805ad5; } .error { fill: #718096; }
.drop { fill: #dd6b20; } .delay { fill: #d69e2e; } .reset { fill: #c53030; } .down { fill: #a0aec0; }
rect.dup { fill: #fed7d7; } rect.lost { fill: #e2e8f0; }
line.kill { stroke: #c53030; stroke-width: 1.5; stroke-dasharray: 3 2; }
text.tick { font-size: 10px; fill: #4a5366; }
.legend span { display: inline-block; margin-right: 14px; font-size: 13px; }
.legend i { display: inline-block; width: 12px; height: 10px; margin-right: 4px; vertical-align: -1px; }
table { border-collapse: collapse; margin-top: 8px; }
th, td { border: 1px solid #d5dae3; padding: 4px 10px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.no { color: #c53030; font-weight: bold; }
.twice { font-size: 12px; color: #9b2c2c; margin-top: 6px; word-break: break-word; }
</style>
</head>
<body>
<h1>idem demo: the incident, three ways</h1>
<p class="lead">Seed {{.Info.Seed}}: {{.Info.Intents}} transfers per mode from {{.Info.Clients}} impatient clients, over a network that drops responses after the server processed the request, delays them past the client's timeout and resets connections; the server is killed with SIGKILL {{.Info.Kills}} time(s) per mode and restarted. Each row is one intent (one transfer a user confirmed), left to right in time; each mark is one attempt, coloured by what happened to it. Red dashed lines are the server kills; rows on a red background are intents whose money moved more than once.</p>
<div class="legend">
<span><i style="background:#2a9d3f"></i>answered</span>
<span><i style="background:#2b6cb0"></i>replayed by idem</span>
<span><i style="background:#805ad5"></i>409 in flight</span>
<span><i style="background:#dd6b20"></i>response dropped</span>
<span><i style="background:#d69e2e"></i>response too late</span>
<span><i style="background:#c53030"></i>connection reset</span>
<span><i style="background:#a0aec0"></i>server down</span>
<span><i style="background:#fed7d7"></i>intent applied twice</span>
</div>
<div class="modes">
{{range .Modes}}<section class="mode {{if eq .Report.Duplicated 0}}{{if eq .Report.Lost 0}}good{{else}}bad{{end}}{{else}}bad{{end}}" data-mode="{{.Mode}}">
<h2>{{.Mode}}</h2>
<div class="facts"><b data-fact="intents">{{.Report.Intents}}</b> intents, <b data-fact="seen">{{.Seen}}</b> attempts on the network, <b data-fact="kills">{{len .Kills}}</b> kill(s), <b data-fact="twice">{{.Twice}}</b> intent(s) applied more than once, <b data-fact="lost">{{.Report.Lost}}</b> lost.</div>
<svg viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="timeline of {{.Mode}}">
{{range .Rows}}<g class="intent" data-applied="{{.Applied}}"><title>{{.Title}}</title>{{if .Class}}<rect class="{{.Class}}" x="0" y="{{f .Y}}" width="{{.Width}}" height="{{f .H}}"/>{{end}}{{range .Marks}}<rect class="{{.Class}} attempt" x="{{f .X}}" y="{{f .Y}}" width="{{f .W}}" height="{{f .H}}"/>{{end}}</g>
{{end}}{{range .Kills}}<line class="kill" x1="{{f .X}}" y1="0" x2="{{f .X}}" y2="{{.PlotHeightOf}}"><title>{{.Title}}</title></line>
{{end}}{{range .Ticks}}<text class="tick" x="{{f .X}}" y="{{.Y}}">{{.Label}}</text>
{{end}}</svg>
{{if .Twice}}<div class="twice">applied more than once: intent {{.TwiceList}}</div>{{end}}
</section>
{{end}}</div>
<h2>The audit</h2>
<table id="summary">
<thead><tr><th>mode</th><th>intents</th><th>attempts</th><th>transfers applied</th><th>duplicated</th><th>lost</th><th>money conserved</th><th>balances as intended</th></tr></thead>
<tbody>
{{range .Reports}}<tr data-mode="{{.Mode}}"><td data-field="mode">{{.Mode}}</td><td data-field="intents">{{.Intents}}</td><td data-field="attempts">{{.Attempts}}</td><td data-field="transfers_applied">{{.Applied}}</td><td data-field="duplicated">{{.Duplicated}}</td><td data-field="lost">{{.Lost}}</td><td data-field="money_conserved"{{if not .Conserved}} class="no"{{end}}>{{yesno .Conserved}}</td><td data-field="balances_as_intended"{{if not .Correct}} class="no"{{end}}>{{yesno .Correct}}</td></tr>
{{end}}</tbody>
</table>
<p class="lead">no-key: retries without a key run again. key-per-attempt: the incident's bug, a new key per retry. idem: one key per intent; every retry is recognised and answered with the recorded result.</p>
</body>
</html>
`))
