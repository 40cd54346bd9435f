# zsh -f zsh_complete.zsh FPATHDIR OUT LINE
#
# Types LINE into an interactive zsh (in a pseudo-terminal, zsh/zpty)
# whose completion system is initialised with the functions of FPATHDIR
# first in $fpath, presses TAB, then a key bound to a widget that writes
# the edited line to OUT: what a user sees after `LINE<TAB>`.  Exit 0 when
# OUT was written, within 20 s (compinit on a loaded machine).
zmodload zsh/zpty || exit 2
dir=$1 out=$2 line=$3
zpty -b z zsh -f -i
zpty -w z "fpath=($dir \$fpath); autoload -Uz compinit; compinit -u -D; unsetopt beep"
# One completion inserted, no menu or listing to wait for.
zpty -w z 'zstyle ":completion:*" menu no; setopt no_auto_menu no_list_ambiguous'
zpty -w z "dump() { print -r -- \"\$BUFFER\" >${(q)out}; BUFFER=; }; zle -N dump; bindkey '^X' dump"
zpty -wn z "$line"$'\t\x18'
for i in {1..400}; do
	[[ -s $out ]] && break
	sleep 0.05
done
zpty -d z
[[ -s $out ]]
