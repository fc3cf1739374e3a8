package console

import (
	"html/template"
	"time"
)

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
}

const style = `<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;justify-content:space-between;align-items:center}
header h1{font-size:17px;margin:0}
main{padding:16px 20px;max-width:1400px}
section{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:12px 16px;margin:0 0 16px}
h2{font-size:15px;margin:0 0 8px}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eceef2;vertical-align:top;font-size:13px}
th{color:#5a6272;font-weight:600}
code{font:12px ui-monospace,monospace;background:#f0f2f5;padding:1px 3px;border-radius:3px}
.counts{display:flex;gap:12px}
.count{flex:1;border:1px solid #dde1e7;border-radius:6px;padding:8px 12px;background:#fff}
.count b{display:block;font-size:22px}
.stuck{color:#b3261e;font-weight:600}
.live{color:#1a7f37}
.msg{background:#e6f4ea;border:1px solid #a8dab5;padding:8px 12px;border-radius:6px;margin-bottom:16px}
.err{background:#fce8e6;border:1px solid #f4b4ae;padding:8px 12px;border-radius:6px;margin-bottom:16px}
form.act{display:grid;grid-template-columns:auto 1fr;gap:4px 8px;margin:6px 0;max-width:520px}
form.act input[type=text],form.act textarea{font:12px ui-monospace,monospace;width:100%;box-sizing:border-box}
button{cursor:pointer}
.muted{color:#5a6272}
</style>`

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>idem console: log in</title>` + style + `</head>
<body><header><h1>idem console</h1></header><main><section>
<h2>Log in</h2>
{{if .Failed}}<p class="err">That token is not the console's.</p>{{end}}
<form method="post" action="/login"><label>Token <input type="password" name="token" id="token" autocomplete="current-password" autofocus></label>
<button type="submit" id="login">Log in</button></form>
</section></main></body></html>`))

var mainPage = template.Must(template.New("page").Funcs(funcs).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>idem console</title>` + style + `</head>
<body><header><h1>idem console</h1><span>{{when .S.Now}}
<form method="post" action="/logout" style="display:inline"><input type="hidden" name="csrf" value="{{.CSRF}}"><button type="submit">Log out</button></form></span></header>
<main>
{{with .Msg}}<p class="msg" id="msg">{{.}}</p>{{end}}
{{with .Err}}<p class="err" id="err">{{.}}</p>{{end}}
<section><h2>Records by state</h2>
<div class="counts">
<div class="count" id="count-completed"><b>{{.S.Completed}}</b>completed</div>
<div class="count" id="count-expired"><b>{{.S.Expired}}</b>expired (behave as new)</div>
<div class="count" id="count-inflight"><b>{{.S.InFlight}}</b>in flight (live lease)</div>
<div class="count" id="count-stuck"><b class="{{if .S.Stuck}}stuck{{end}}">{{.S.Stuck}}</b>stuck (lease ended or past the report bound)</div>
</div>
<p class="muted">{{.S.Counted}} records counted{{if .S.Capped}} (the count stops there; idem keys lists them all){{end}}.</p>
</section>

<section><h2>Pending leased work</h2>
{{if not .S.Pending}}<p class="muted">Nothing is pending.</p>{{else}}
<table id="pending"><tr><th>Scope</th><th>Key</th><th>Kind</th><th>Created</th><th>Lease</th><th>Attempts</th><th>Steps</th><th>Last error</th><th>Act</th></tr>
{{range .S.Pending}}<tr class="{{if .Stuck}}is-stuck{{else}}is-live{{end}}" data-key="{{.Key}}">
<td><code>{{.Scope}}</code></td><td><code>{{.Key}}</code></td><td>{{.Kind}}</td><td>{{when .Created}}</td>
<td>{{if .Stuck}}<span class="stuck">stuck</span>{{else}}<span class="live">live</span>{{end}} until {{when .Until}}</td>
<td>{{.Attempts}}</td>
<td>{{range .Steps}}<div><code>{{.Name}}</code>: <code>{{.Output}}</code></div>{{else}}-{{end}}</td>
<td>{{if .LastError}}{{.LastError}}{{else}}-{{end}}</td>
<td>{{if .Stuck}}
<form class="act" method="post" action="/resolve">
<input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="scope" value="{{.Scope}}"><input type="hidden" name="key" value="{{.Key}}"><input type="hidden" name="token" value="{{.Token}}">
<label>Status</label><input type="text" name="status" value="201">
<label>Body</label><textarea name="body" rows="2">{}</textarea>
<label>Actor</label><input type="text" name="actor">
<label>Reason</label><input type="text" name="reason">
<span></span><span><button type="submit" name="resolve" value="1">Resolve with this answer</button>
<button type="submit" name="abandon" value="1">Abandon</button></span>
</form>
<form class="act" method="post" action="/forget">
<input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="scope" value="{{.Scope}}"><input type="hidden" name="key" value="{{.Key}}"><input type="hidden" name="token" value="{{.Token}}"><input type="hidden" name="force" value="1">
<label>Actor</label><input type="text" name="actor">
<label>Reason</label><input type="text" name="reason">
<span></span><span><button type="submit">Forget (the next request runs it again)</button></span>
</form>
{{else}}<span class="muted">held: its holder may be running it</span>{{end}}</td></tr>
{{end}}</table>{{end}}
</section>

<section><h2>Recent outcomes</h2>
{{if not .S.Recent}}<p class="muted">No completed record.</p>{{else}}
<table id="recent"><tr><th>Scope</th><th>Key</th><th>State</th><th>Status</th><th>Kind</th><th>Created</th><th>Expires</th><th>Forget</th></tr>
{{range .S.Recent}}<tr><td><code>{{.Scope}}</code></td><td><code>{{.Key}}</code></td><td>{{.State}}</td><td>{{.Status}}</td><td>{{if .Kind}}{{.Kind}}{{else}}-{{end}}</td><td>{{when .Created}}</td><td>{{when .Until}}</td>
<td><form method="post" action="/forget"><input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="scope" value="{{.Scope}}"><input type="hidden" name="key" value="{{.Key}}"><input type="hidden" name="token" value="{{.Token}}">
<input type="text" name="actor" placeholder="actor" size="8"> <input type="text" name="reason" placeholder="reason" size="14"> <button type="submit">Forget</button></form></td></tr>
{{end}}</table>{{end}}
</section>

<section><h2>Audit log</h2>
{{if not .S.Audit}}<p class="muted">No operator has changed anything.</p>{{else}}
<table id="audit"><tr><th>#</th><th>At</th><th>Actor</th><th>Action</th><th>Scope</th><th>Key</th><th>Status</th><th>Was</th><th>Reason</th></tr>
{{range .S.Audit}}<tr><td>{{.ID}}</td><td>{{when .At}}</td><td>{{.Actor}}</td><td>{{.Action}}</td><td><code>{{.Scope}}</code></td><td><code>{{.Key}}</code></td><td>{{if .Status}}{{.Status}}{{else}}-{{end}}</td><td>{{.Was}}</td><td>{{.Reason}}</td></tr>
{{end}}</table>{{end}}
</section>
</main></body></html>`))
