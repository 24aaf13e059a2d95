#!/bin/bash
# tree.sh STOP|CONT : signal pong_student.py and all its descendants
root=$(pgrep -f "benchmarks/pong_student.py" | head -1)
all="$root"; frontier="$root"
while [ -n "$frontier" ]; do
  next=""; for p in $frontier; do c=$(pgrep -P $p); next="$next $c"; done
  frontier=$(echo $next); all="$all $frontier"
done
kill -$1 $all && echo "$1 $all"
