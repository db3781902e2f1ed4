"""The report page's fixed stylesheet and script, inlined so the page works offline.

The script renders a kept episode's conversation when its row is opened, from
the JSON embedded in the page (``episodes-data``), using ``textContent`` so
that model output containing HTML is shown, never run.
"""

from __future__ import annotations

__all__ = ["CSS", "SCRIPT"]

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2330;
background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:16px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c9cfdb}main{padding:16px 24px;max-width:1200px}
h2{font-size:17px;margin:28px 0 8px}table{border-collapse:collapse;background:#fff;margin:4px 0}
th,td{border:1px solid #dde1e8;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.charts{display:flex;flex-wrap:wrap;gap:14px}
figure.chart{background:#fff;border:1px solid #dde1e8;margin:0;padding:8px}
figure.chart figcaption{font-weight:600;margin-bottom:4px}
svg .grid{stroke:#e4e7ec}svg .tick,svg .axis-label,svg .empty{font-size:11px;fill:#4a5263}
.legend span{display:inline-block;margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
button.open{font:inherit;padding:1px 8px;cursor:pointer}
#episode{position:fixed;top:0;right:0;bottom:0;width:min(46vw,640px);overflow:auto;
background:#fff;border-left:3px solid #0072B2;padding:10px 16px;box-shadow:-4px 0 16px #0003}
#episode[hidden]{display:none}#episode h3{margin:4px 0;font-size:15px;padding-right:40px}
button.close{position:absolute;top:8px;right:10px;font:inherit;font-size:18px;cursor:pointer}
.turn{border-left:4px solid #c9cfdb;margin:8px 0;padding:4px 10px;background:#fafbfc}
.turn.assistant{border-color:#0072B2}.turn.user{border-color:#009E73}
.turn.feedback{border-color:#D55E00}.turn .role{font-weight:600;font-size:12px;color:#4a5263}
.turn pre{white-space:pre-wrap;word-break:break-word;margin:4px 0 0;font:13px/1.4 ui-monospace,
monospace}.score{float:right;font-weight:600}.err{color:#b00020}.note{color:#4a5263}
"""

SCRIPT = """
(function(){
  var data = JSON.parse(document.getElementById('episodes-data').textContent);
  var panel = document.getElementById('episode');
  function el(tag, cls, text){var e=document.createElement(tag);if(cls){e.className=cls;}
    if(text!==undefined&&text!==null){e.textContent=String(text);}return e;}
  function show(run, kind, i){
    var ep = data[run][kind][i];
    panel.textContent = '';
    var close = el('button', 'close', '\u00d7');
    close.title = 'close (Esc)';
    close.addEventListener('click', function(){ panel.hidden = true; });
    panel.appendChild(close);
    panel.appendChild(el('h3', null, data[run].label + ' - episode ' + ep.index +
      ' (sample ' + JSON.stringify(ep.sample_id) + ')'));
    panel.appendChild(el('p', 'note', 'interaction ' + ep.interaction + ', ended by ' +
      ep.end_reason + ', ' + ep.turns + ' assistant turn(s), final score ' + ep.final_score));
    var prompt = ep.messages.length - ep.turns - ep.user_turns;
    var turn = 0;
    ep.messages.forEach(function(m, k){
      var cls = m.role, label = m.role;
      if (k >= prompt && m.role === 'assistant'){ turn += 1; label = 'assistant, turn ' + turn; }
      else if (k >= prompt && m.role === 'user'){ cls = 'feedback';
        label = 'interaction feedback after turn ' + turn; }
      else if (k < prompt){ label = m.role + ' (prompt)'; }
      var box = el('div', 'turn ' + cls);
      if (cls === 'assistant' && k >= prompt && ep.scores.length >= turn){
        box.appendChild(el('span', 'score', 'score ' + ep.scores[turn - 1]));
      }
      box.appendChild(el('div', 'role', label));
      box.appendChild(el('pre', null, m.content));
      panel.appendChild(box);
    });
    ep.errors.forEach(function(e){
      panel.appendChild(el('p', 'err', 'error in ' + e.where + ': ' + e.type + ': ' + e.message));
    });
    panel.hidden = false;
    panel.scrollTop = 0;
  }
  document.addEventListener('keydown', function(ev){
    if (ev.key === 'Escape') { panel.hidden = true; }
  });
  document.addEventListener('click', function(ev){
    var b = ev.target.closest('button.open');
    if (!b) { return; }
    show(Number(b.dataset.run), b.dataset.kind, Number(b.dataset.i));
  });
})();
"""
