#!/usr/bin/env bash
# Print the private apt sources list the k8s-real build uses (deb and deb-src lines for a Debian
# suite and its -security suite), with the Debian mirrors this machine's own apt already uses.
#
# Why: a fixed host (deb.debian.org) fails on a site that reaches Debian only through its own
# mirror or proxy. The machine's apt configuration already names the right one, so it is read from
# there: the one-line format in sources.list and sources.list.d/*.list, and the deb822 format in
# sources.list.d/*.sources (both described in apt's sources.list(5) manual page).
# There is no built-in default host: when no Debian mirror is found, the script fails and names the
# file to fix.
#
# Usage: apt-sources.sh [SUITE]        (SUITE defaults to bookworm)
#
# Environment:
#   K8S_REAL_APT_ETC                  apt configuration directory to read (default /etc/apt)
#   K8S_REAL_DEBIAN_MIRROR            use this Debian archive URI instead of the one found
#   K8S_REAL_DEBIAN_SECURITY_MIRROR   use this security archive URI instead of the one found;
#                                     "none" leaves the -security suite out on purpose
#
# A Debian entry is one whose suite is a Debian codename or alias (bookworm, bookworm-updates,
# stable, ...); "<codename>-security" and the older "<codename>/updates" are the security archive.
# Of several entries the first in apt's reading order wins (sources.list, then sources.list.d
# in file-name order). Entries with "Enabled: no" are skipped.
set -euo pipefail

SUITE="${1:-bookworm}"
APT_ETC="${K8S_REAL_APT_ETC:-/etc/apt}"
# Debian's release codenames and suite aliases (https://www.debian.org/releases/); Ubuntu's
# codenames are not here, so an Ubuntu mirror is never taken for a Debian one.
is_debian_suite() {
	case "$1" in
	buzz | rex | bo | hamm | slink | potato | woody | sarge | etch | lenny | squeeze | wheezy | jessie) return 0 ;;
	stretch | buster | bullseye | bookworm | trixie | forky | duke | sid | experimental) return 0 ;;
	stable | oldstable | oldoldstable | testing | unstable) return 0 ;;
	esac
	return 1
}

die() {
	printf 'apt-sources.sh: %s\n' "$*" >&2
	exit 1
}

# The files apt reads, in its order: sources.list, then sources.list.d/*.list and *.sources
# sorted by name together.
source_files() {
	[[ -f "$APT_ETC/sources.list" ]] && printf '%s\n' "$APT_ETC/sources.list"
	if [[ -d "$APT_ETC/sources.list.d" ]]; then
		find "$APT_ETC/sources.list.d" -maxdepth 1 -type f \( -name '*.list' -o -name '*.sources' \) -print |
			LC_ALL=C sort
	fi
	return 0
}

# One "<uri> <suite> <file>:<line>" per (URI, suite) of every enabled deb/deb-src entry.
entries() {
	local file
	while IFS= read -r file; do
		case "$file" in
		*.sources) deb822_entries "$file" ;;
		*) one_line_entries "$file" ;;
		esac
	done < <(source_files)
}

# "deb [ options ] uri suite [component ...]"; '#' starts a comment.
one_line_entries() {
	awk -v file="$1" '
		{
			sub(/#.*/, "")
			if ($1 != "deb" && $1 != "deb-src") next
			i = 2
			if (substr($i, 1, 1) == "[") {
				while (i <= NF && $i !~ /\]$/) i++
				i++
			}
			if (i + 1 <= NF) print $i, $(i + 1), file ":" NR
		}' "$1"
}

# deb822 stanzas separated by blank lines; "Field: value", continuation lines start with blanks,
# field names are case-insensitive, '#' lines are comments.
deb822_entries() {
	awk -v file="$1" '
		function flush(   n, m, t, u, s, types, uris, suites, deb) {
			if (start && tolower(f["enabled"]) != "no") {
				n = split(f["types"], types, " ")
				deb = 0
				for (t = 1; t <= n; t++) if (types[t] == "deb" || types[t] == "deb-src") deb = 1
				if (deb) {
					n = split(f["uris"], uris, " ")
					m = split(f["suites"], suites, " ")
					for (u = 1; u <= n; u++) for (s = 1; s <= m; s++) print uris[u], suites[s], file ":" start
				}
			}
			delete f
			start = 0
			key = ""
		}
		/^#/ { next }
		/^[ \t]*$/ { flush(); next }
		/^[ \t]/ { if (key != "") f[key] = f[key] " " $0; next }
		{
			if (!start) start = NR
			key = tolower(substr($0, 1, index($0, ":") - 1))
			f[key] = substr($0, index($0, ":") + 1)
			gsub(/^[ \t]+|[ \t]+$/, "", f[key])
		}
		END { flush() }' "$1"
}

# The first URI whose suite is a Debian one, of the kind asked (main | security), as
# "<uri> <file>:<line>"; nothing when there is none.
find_mirror() {
	local kind=$1 uri suite where base security
	while read -r uri suite where; do
		base=${suite%%/*}
		base=${base%%-*}
		is_debian_suite "$base" || continue
		security=main
		[[ "$suite" == *-security || "$suite" == */updates ]] && security=security
		[[ "$security" == "$kind" ]] || continue
		printf '%s %s\n' "${uri%/}" "$where"
		return 0
	done < <(entries)
	return 0
}

hint="$APT_ETC/sources.list.d/debian.sources (or $APT_ETC/sources.list)"

if [[ -n "${K8S_REAL_DEBIAN_MIRROR:-}" ]]; then
	main_uri=${K8S_REAL_DEBIAN_MIRROR%/}
	main_from="K8S_REAL_DEBIAN_MIRROR"
else
	read -r main_uri main_from < <(find_mirror main) ||
		die "no Debian mirror in $APT_ETC/sources.list or $APT_ETC/sources.list.d/*.list|*.sources; add one to $hint, e.g. 'Types: deb' 'URIs: http://<your mirror>/debian' 'Suites: $SUITE' 'Components: main', or set K8S_REAL_DEBIAN_MIRROR"
fi

if [[ "${K8S_REAL_DEBIAN_SECURITY_MIRROR:-}" == none ]]; then
	security_uri=""
	security_from="K8S_REAL_DEBIAN_SECURITY_MIRROR=none"
elif [[ -n "${K8S_REAL_DEBIAN_SECURITY_MIRROR:-}" ]]; then
	security_uri=${K8S_REAL_DEBIAN_SECURITY_MIRROR%/}
	security_from="K8S_REAL_DEBIAN_SECURITY_MIRROR"
else
	read -r security_uri security_from < <(find_mirror security) ||
		die "no Debian security mirror (suite <codename>-security) in $APT_ETC/sources.list or $APT_ETC/sources.list.d/*.list|*.sources; add one to $hint, e.g. 'URIs: http://<your mirror>/debian-security' 'Suites: $SUITE-security', or set K8S_REAL_DEBIAN_SECURITY_MIRROR (none to build without security updates)"
fi

printf '# Debian mirror from %s\n' "$main_from"
printf 'deb %s %s main\n' "$main_uri" "$SUITE"
printf 'deb-src %s %s main\n' "$main_uri" "$SUITE"
printf '# Debian security mirror from %s\n' "$security_from"
if [[ -n "$security_uri" ]]; then
	printf 'deb %s %s-security main\n' "$security_uri" "$SUITE"
	printf 'deb-src %s %s-security main\n' "$security_uri" "$SUITE"
fi
