# bash completion for heapprof(1) and heapprofd(8).
# Commands, options (read from `heapprof COMMAND --help`, so they follow
# the binary), option values (views, unwind modes, dumps, sorts, trace
# modes, units), -p process ids, -n process names and profile files.

_heapprof_commands="record report pprof flamegraph diff check symbolize sql daemon dump snapshot top serve help version"

# The options `heapprof CMD --help` names.
_heapprof_options()
{
	"${1:-heapprof}" "$2" --help 2>/dev/null |
		grep -oE -- '(^|[ ,[])--?[a-zA-Z][a-zA-Z0-9-]*' |
		sed 's/^[ ,[]//' | sort -u
}

# Running processes: their pids (with -p) or names (with -n).
_heapprof_pids()
{
	local d
	for d in /proc/[0-9]*; do
		printf '%s\n' "${d#/proc/}"
	done
}
_heapprof_names()
{
	cat /proc/[0-9]*/comm 2>/dev/null | sort -u
}

_heapprof()
{
	local cur prev cmd i hp
	COMPREPLY=()
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	hp=${COMP_WORDS[0]}
	cmd=""
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		-*) ;;
		*) cmd=${COMP_WORDS[i]}; break ;;
		esac
	done
	if [[ ${hp##*/} == heapprofd ]]; then
		cmd=daemon
	elif [[ -z $cmd ]]; then
		COMPREPLY=($(compgen -W "$_heapprof_commands --help --version" -- "$cur"))
		return
	fi
	case $cmd in
	help)
		COMPREPLY=($(compgen -W "$_heapprof_commands" -- "$cur"))
		return
		;;
	esac
	# Option values.
	case $prev in
	--view)
		COMPREPLY=($(compgen -W "space alloc_space objects alloc_objects" -- "$cur"))
		return
		;;
	--unwind)
		COMPREPLY=($(compgen -W "dwarf fp" -- "$cur"))
		return
		;;
	--dump)
		COMPREPLY=($(compgen -W "peak end 1 -1" -- "$cur"))
		return
		;;
	--sort)
		COMPREPLY=($(compgen -W "value rate count" -- "$cur"))
		return
		;;
	--trace)
		COMPREPLY=($(compgen -W "streaming oneshot ring" -- "$cur"))
		return
		;;
	-i | --interval | --shmem-size | --trace-buffer | --memory-dump)
		COMPREPLY=($(compgen -W "1 4096 65536 512KiB 64MiB 80%" -- "$cur"))
		return
		;;
	-p | --pid)
		COMPREPLY=($(compgen -W "$(_heapprof_pids)" -- "$cur"))
		return
		;;
	-n | --name)
		local IFS=$'\n'
		COMPREPLY=($(compgen -W "$(_heapprof_names)" -- "$cur"))
		return
		;;
	-o | --output | --db | --baseline | --junit | -f | --contents-dir | -c | --config | --token-file)
		COMPREPLY=($(compgen -f -- "$cur"))
		return
		;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_heapprof_options "$hp" "$cmd")" -- "$cur"))
		return
	fi
	case $cmd in
	report | pprof | flamegraph | diff | check | symbolize | sql)
		# Profiles: *.db files and directories.
		COMPREPLY=($(compgen -f -X '!*.db' -- "$cur") $(compgen -d -- "$cur"))
		;;
	record)
		COMPREPLY=($(compgen -c -- "$cur"))
		;;
	esac
}
complete -F _heapprof heapprof heapprofd
