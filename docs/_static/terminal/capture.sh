#!/bin/bash
# Capture a scalepca command as a terminal shows it: run it in a fresh 110 × 32 tmux pane, save a
# snapshot whenever the screen changes (NAME.live-NNN.txt: the bars while they move) and the whole
# pane with its scrollback once the command is done (NAME.txt). From the repository root:
#
#   docs/_static/terminal/capture.sh run-quickstart "scalepca run configs/quickstart.yaml"
#
# OUT (default /tmp/scalepca-capture) is where the files go. The captures in this folder were
# made this way; the "-during" files are one snapshot each, the "-log" file the same run with its
# output redirected to a file (no terminal: one line per pass).
name=$1; cmd=$2; out=${OUT:-/tmp/scalepca-capture}; root=$(pwd); mkdir -p "$out"
tmux kill-session -t scalepca-capture 2>/dev/null
tmux new-session -d -s scalepca-capture -x 110 -y 32 "bash --norc --noprofile"
tmux set-option -t scalepca-capture history-limit 5000 >/dev/null
tmux send-keys -t scalepca-capture "export PS1='$ ' PATH=$root/.venv/bin:\$PATH \
PROMPT_COMMAND='s=\$?; [ \$s != 0 ] && echo \"[exit status \$s]\"'; cd $root; clear" Enter
sleep 1
tmux send-keys -t scalepca-capture "$cmd" Enter
sleep 1
i=0; prev=""
while true; do
  snap=$(tmux capture-pane -t scalepca-capture -p)
  if [ "$snap" != "$prev" ]; then
    i=$((i + 1)); echo "$snap" > "$out/$name.live-$(printf %03d $i).txt"; prev=$snap
  fi
  cur=$(tmux display -p -t scalepca-capture '#{pane_current_command}')
  last=$(echo "$snap" | grep -v '^$' | tail -1)
  [ "$cur" = "bash" ] && [ "$last" = '$' ] && break
  sleep 0.5
done
tmux capture-pane -t scalepca-capture -p -S - -E - | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' \
  > "$out/$name.txt"
tmux kill-session -t scalepca-capture
echo "$name: $i snapshots in $out"
