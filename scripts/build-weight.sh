#!/usr/bin/env bash
# Build weight of a minimal downstream binary: a `main` that builds a client from the
# environment, lists pets once and prints the count. Each configuration is a crate of its own
# under $BUILD_WEIGHT_DIR (default /tmp/build-weight), built from clean, side by side:
#
#   default      petstore-client with its default features
#   rustls       default-features = false, features = ["rustls", "system-proxy"] (no HTTP/2)
#   native-tls   default-features = false, features = ["native-tls", "system-proxy"] (no HTTP/2)
#   ring         as `rustls`, but rustls's `ring` provider in place of aws-lc-rs: the
#                downstream enables reqwest's `rustls-no-provider` and rustls's `ring`, and
#                installs the ring provider and gives the client a reqwest client of its own
#   progenitor   progenitor's `generate_api!` over an OpenAPI 3.0 document of the same three
#                operations, with reqwest as progenitor's README shows it (default features)
#   progenitor-static  the code progenitor's `Generator` emits for that document (what its
#                `build.rs` and `cargo progenitor` forms write), compiled with only the runtime
#                dependencies: progenitor-client, and reqwest as above; the generator itself is
#                built and run once beforehand, outside the measurement
#
# For each it prints: crates compiled (`Compiling` lines of the clean debug build), crates in
# `cargo tree -e normal`, debug-build CPU seconds (user + sys, median of $RUNS clean builds with
# `-j 2`), and the size of the stripped release binary (one build: the size does not vary).
#
#   scripts/build-weight.sh                  # all six, 3 runs each
#   RUNS=1 scripts/build-weight.sh ring rustls
#   SETUP_ONLY=1 scripts/build-weight.sh      # write the crates (and fetch) only
#   SIZES=0 RUNS=1 scripts/build-weight.sh   # one more debug round, no release builds
#   CRATES=1 scripts/build-weight.sh default progenitor-static   # the sizes by crate, below
#
# CRATES=1 replaces all of the above by one release build of each configuration given, read by
# cargo-bloat (`cargo install --locked cargo-bloat`), the binary unstripped as it needs the
# symbols. It prints the `.text` bytes of each crate side by side (cargo-bloat's `--crates`: a
# generic function counts for the crate whose code instantiated it, if a library's, else for the
# crate its name starts with), grouped: the client's code (`petstore_client`, or
# `progenitor_client` and the binary's own crate, where progenitor's generated code is), the
# crates the design card names (chrono with num-traits, thiserror, backon with fastrand), those
# HTTP/2 brings (h2 with equivalent, fnv, futures-sink, hashbrown, indexmap, tokio-util),
# std, the other crates, and [Unknown] (symbols of no crate: aws-lc's C and assembly code
# mostly). Then the totals per group, `.text` whole (the crates' sum leaves out padding and
# code without a symbol), the stripped binary (which adds .rodata, unwinding tables and
# relocations), and the design card's crates again, counted by symbol name wherever their
# generic code was instantiated. With two configurations or more, the last column is the
# first's figure minus the second's. cargo-bloat's JSON is kept in $BUILD_WEIGHT_DIR.
#
# Needs: cargo, crates.io (first run only: the builds themselves run `--offline`), /usr/bin/time,
# strip, a C compiler (aws-lc-sys, ring), OpenSSL headers with pkg-config for `native-tls`, and
# cargo-bloat for CRATES=1.
# Every target directory is deleted after its build; the raw figures are kept, one a line, in
# $BUILD_WEIGHT_DIR/results.txt as they come, so that an interrupted run still has its first ones.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
work=${BUILD_WEIGHT_DIR:-/tmp/build-weight}
runs=${RUNS:-3}
jobs=${JOBS:-2}
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(default rustls native-tls ring progenitor progenitor-static)
cargo=(nice -n 10 cargo)

mkdir -p "$work"

petstore_main='use petstore_client::PetStoreClient;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = PetStoreClient::from_env()?;
    let pets = client.list_pets().send().await?;
    println!("{} pets", pets.len());
    Ok(())
}
'

# The three operations of the API (docs/SPEC), as an OpenAPI 3.0 document for progenitor.
openapi='{
  "openapi": "3.0.3",
  "info": { "title": "Pet Store", "version": "1.0.0" },
  "servers": [ { "url": "https://petstore.example/v1" } ],
  "security": [ { "bearer": [] } ],
  "paths": {
    "/pets": {
      "get": {
        "operationId": "listPets",
        "parameters": [
          { "name": "limit", "in": "query", "required": false,
            "schema": { "type": "integer", "format": "int32", "minimum": 1, "maximum": 100, "default": 20 } },
          { "name": "status", "in": "query", "required": false,
            "schema": { "$ref": "#/components/schemas/PetStatus" } }
        ],
        "responses": {
          "200": { "description": "The pets", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Pets" } } } },
          "401": { "description": "Missing or invalid API key", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } }
        }
      },
      "post": {
        "operationId": "createPet",
        "requestBody": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/NewPet" } } } },
        "responses": {
          "201": { "description": "The created pet", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Pet" } } } },
          "400": { "description": "Invalid body", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } },
          "401": { "description": "Missing or invalid API key", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } }
        }
      }
    },
    "/pets/{petId}": {
      "get": {
        "operationId": "getPet",
        "deprecated": true,
        "parameters": [
          { "name": "petId", "in": "path", "required": true, "schema": { "type": "integer", "format": "int64" } }
        ],
        "responses": {
          "200": { "description": "The pet", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Pet" } } } },
          "401": { "description": "Missing or invalid API key", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } },
          "404": { "description": "No such pet", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } }
        }
      }
    }
  },
  "components": {
    "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
    "schemas": {
      "PetStatus": { "type": "string", "enum": ["available", "pending", "sold"] },
      "NewPet": {
        "type": "object", "required": ["name", "categoryId"],
        "properties": {
          "name": { "type": "string" },
          "categoryId": { "type": "integer", "format": "int64" },
          "status": { "$ref": "#/components/schemas/PetStatus" }
        }
      },
      "Pet": {
        "type": "object", "required": ["id", "name", "categoryId"],
        "properties": {
          "id": { "type": "integer", "format": "int64" },
          "name": { "type": "string" },
          "categoryId": { "type": "integer", "format": "int64" },
          "status": { "$ref": "#/components/schemas/PetStatus" }
        }
      },
      "Pets": { "type": "array", "items": { "$ref": "#/components/schemas/Pet" } },
      "Error": {
        "type": "object", "required": ["code", "message", "status"],
        "properties": {
          "code": { "type": "string" },
          "message": { "type": "string" },
          "status": { "type": "integer", "format": "int32" }
        }
      }
    }
  }
}
'

progenitor_main='use std::time::Duration;

progenitor::generate_api!("openapi.json");

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base_url = std::env::var("PETSTORE_BASE_URL")?;
    let key = std::env::var("PETSTORE_API_KEY")?;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {key}").parse()?);
    let http = reqwest::ClientBuilder::new()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(30))
        .default_headers(headers)
        .build()?;
    let client = Client::new_with_client(&base_url, http);
    let pets = client.list_pets(None, None).await?.into_inner();
    println!("{} pets", pets.len());
    Ok(())
}
'

# Writes the code progenitor generates for the document, as its README's `build.rs` does.
generator_main='fn main() {
    let file = std::fs::File::open("openapi.json").unwrap();
    let spec = serde_json::from_reader(file).unwrap();
    let mut generator = progenitor::Generator::default();
    let tokens = generator.generate_tokens(&spec).unwrap();
    let ast = syn::parse2(tokens).unwrap();
    std::fs::write(std::env::args().nth(1).unwrap(), prettyplease::unparse(&ast)).unwrap();
}
'

ring_main='use petstore_client::PetStoreClientBuilder;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The application picks the provider of rustls, ring, for the process, and gives the client a
    // reqwest client of its own (reqwest with `rustls-no-provider` uses that provider); without
    // a TLS feature, the client builds its own only for plain HTTP.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let client = PetStoreClientBuilder::from_env().http_client(http).build()?;
    let pets = client.list_pets().send().await?;
    println!("{} pets", pets.len());
    Ok(())
}
'

tokio_dep='tokio = { version = "1.54.1", features = ["rt-multi-thread", "macros"] }'

# Writes the downstream crate of one configuration.
setup() {
    local name=$1 dir="$work/$1"
    mkdir -p "$dir/src"
    local deps main=$petstore_main
    case $name in
        default) deps="petstore-client = { path = \"$repo\" }" ;;
        rustls) deps="petstore-client = { path = \"$repo\", default-features = false, features = [\"rustls\", \"system-proxy\"] }" ;;
        native-tls) deps="petstore-client = { path = \"$repo\", default-features = false, features = [\"native-tls\", \"system-proxy\"] }" ;;
        ring)
            deps="petstore-client = { path = \"$repo\", default-features = false, features = [\"system-proxy\"] }
reqwest = { version = \"0.13.5\", default-features = false, features = [\"rustls-no-provider\"] }
rustls = { version = \"0.23\", default-features = false, features = [\"ring\", \"std\", \"tls12\"] }"
            main=$ring_main ;;
        progenitor)
            deps='futures = "0.3"
progenitor = "0.15.1"
reqwest = { version = "0.13", features = ["json", "query", "stream"] }
serde = { version = "1.0", features = ["derive"] }
serde_json = "1.0"'
            main=$progenitor_main
            printf '%s' "$openapi" >"$dir/openapi.json" ;;
        progenitor-static)
            deps='futures = "0.3"
progenitor-client = "0.15.1"
reqwest = { version = "0.13", features = ["json", "query", "stream"] }
serde = { version = "1.0", features = ["derive"] }
serde_json = "1.0"'
            main=${progenitor_main/'progenitor::generate_api!("openapi.json");'/'include!("codegen.rs");'}
            generate "$dir/src/codegen.rs" ;;
        *) echo "unknown configuration: $name" >&2; exit 2 ;;
    esac
    cat >"$dir/Cargo.toml" <<EOF
[package]
name = "weight-$name"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
$deps
$tokio_dep

[workspace]
EOF
    printf '%s' "$main" >"$dir/src/main.rs"
    # The client's configurations start from the repository's lock file, so that they build the
    # versions its tests build; progenitor's resolves afresh.
    if [ "${name#progenitor}" = "$name" ] && [ ! -f "$dir/Cargo.lock" ]; then
        cp "$repo/Cargo.lock" "$dir/Cargo.lock"
    fi
    (cd "$dir" && "${cargo[@]}" fetch -q)
}

# Runs progenitor's generator over the document once, into $1 (not measured).
generate() {
    local gen="$work/progenitor-generator"
    [ -f "$1" ] && return
    mkdir -p "$gen/src"
    printf '%s' "$openapi" >"$gen/openapi.json"
    printf '%s' "$generator_main" >"$gen/src/main.rs"
    cat >"$gen/Cargo.toml" <<'TOML'
[package]
name = "progenitor-generator"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
prettyplease = "0.2.22"
progenitor = { version = "0.15.1", default-features = false }
serde_json = "1.0"
syn = "2.0"

[workspace]
TOML
    (cd "$gen" && CARGO_TARGET_DIR="$gen/target" "${cargo[@]}" run -q -j "$jobs" -- "$1")
    rm -rf "$gen/target"
}

# One clean debug build: prints "<crates compiled> <cpu seconds>".
debug_build() {
    local dir="$work/$1" target
    target=$(mktemp -d "$work/target-$1-XXXX")
    (cd "$dir" && CARGO_TARGET_DIR=$target /usr/bin/time -f '%U %S' -o "$target.time" \
        "${cargo[@]}" build --offline -j "$jobs" 2>"$target.log")
    local crates cpu
    crates=$(grep -c '^ *Compiling ' "$target.log")
    cpu=$(awk '{ printf "%.1f", $1 + $2 }' "$target.time")
    rm -rf "$target" "$target.time" "$target.log"
    echo "$crates $cpu"
}

# One clean release build: prints the stripped binary's size in bytes.
release_size() {
    local dir="$work/$1" target
    target=$(mktemp -d "$work/target-$1-XXXX")
    (cd "$dir" && CARGO_TARGET_DIR=$target "${cargo[@]}" build --offline --release -q -j "$jobs")
    strip -o "$target/stripped" "$target/release/weight-$1"
    stat -c %s "$target/stripped"
    rm -rf "$target"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# One release build of configuration $1 read by cargo-bloat, by crate and by function, into
# $work/bloat-$1-{crates,functions}.json: prints the stripped binary's size in bytes.
bloat_build() {
    local name=$1 dir="$work/$1" target
    target=$(mktemp -d "$work/target-$1-XXXX")
    local bloat=("${cargo[@]}" bloat --release --frozen -j "$jobs" --target-dir "$target" -n 0
        --message-format json)
    (cd "$dir" && "${bloat[@]}" --crates >"$work/bloat-$name-crates.json" 2>"$target.log" &&
        "${bloat[@]}" >"$work/bloat-$name-functions.json" 2>>"$target.log") ||
        { cat "$target.log" >&2; exit 1; }
    strip -o "$target/stripped" "$target/release/weight-$name"
    stat -c %s "$target/stripped"
    rm -rf "$target" "$target.log"
}

# The figures of bloat_build, one a line: "<configuration> <crate or total> <bytes>".
bloat_figures() {
    local name=$1 stripped=$2 json="$work/bloat-$1-crates.json"
    grep -o '"name":"[^"]*","size":[0-9]*' "$json" |
        sed "s/^\"name\":\"\(.*\)\",\"size\":\(.*\)$/$name \1 \2/"
    echo "$name .text $(grep -o '"text-section-size":[0-9]*' "$json" | cut -d: -f2)"
    echo "$name stripped $stripped"
    # The design card's crates by symbol name: `chrono::…`, `<chrono::… as …>`, `<&chrono::…`.
    grep -o '"name":"\([^"\\]\|\\.\)*","size":[0-9]*' "$work/bloat-$name-functions.json" |
        awk -v n="$name" -F '","size":' '
            { sub(/^"name":"/, "", $1) }
            match($1, /^<?(&(mut )?)?(chrono|num_traits|thiserror|backon|fastrand)::/) {
                c = substr($1, RSTART, RLENGTH); gsub(/^<?(&(mut )?)?|::$/, "", c); s[c] += $2
            }
            END { for (c in s) print n, "by-name:" c, s[c] }'
}

crates_table() {
    local figures=$1
    awk -v configs="${configs[*]}" '
        function group(c) {
            if (c == "petstore_client" || c == "progenitor_client" || c ~ /^weight_/) return 1
            if (c ~ /^(chrono|num_traits|thiserror|backon|fastrand)$/) return 2
            if (c ~ /^(h2|equivalent|fnv|futures_sink|hashbrown|indexmap|tokio_util)$/) return 3
            if (c == "std") return 4
            if (c == "[Unknown]") return 6
            return 5
        }
        function kb(b) { return sprintf("%.1f", b / 1000) }
        function row(label, what,   i, line) {
            line = "| " label
            for (i = 1; i <= n; i++) line = line " | " kb(v[cfg[i], what])
            if (n > 1) {
                d = sprintf("%+.1f", (v[cfg[1], what] - v[cfg[2], what]) / 1000)
                line = line " | " (d ~ /^[-+]0\.0$/ ? "0.0" : d)
            }
            print line " |"
        }
        BEGIN {
            n = split(configs, cfg, " ")
            name[1] = "client code"; name[2] = "design card"; name[3] = "HTTP/2"
            name[4] = "std"; name[5] = "other crates"; name[6] = "[Unknown]"
        }
        { v[$1, $2] = $3 }
        $2 !~ /^(\.text|stripped|by-name:)/ {
            if (!($2 in seen)) { seen[$2] = 1; crates[++m] = $2 }
            v[$1, "group " group($2)] += $3; v[$1, "sum"] += $3
            if ($3 > top[$2]) top[$2] = $3
        }
        END {
            head = "| Group | Crate"; rule = "|---|---"
            for (i = 1; i <= n; i++) { head = head " | " cfg[i]; rule = rule "|---:" }
            if (n > 1) { head = head " | Difference"; rule = rule "|---:" }
            print "`.text` by crate, KB (1,000 bytes):"; print ""; print head " |"; print rule "|"
            for (g = 1; g <= 6; g++) {
                # The crates of the group, largest first (a selection sort: few rows).
                k = 0
                for (j = 1; j <= m; j++) if (group(crates[j]) == g) list[++k] = crates[j]
                for (a = 1; a <= k; a++) for (b = a + 1; b <= k; b++)
                    if (top[list[b]] > top[list[a]]) { t = list[a]; list[a] = list[b]; list[b] = t }
                for (a = 1; a <= k; a++) row(name[g] " | " list[a], list[a])
            }
            print ""; print head " |"; print rule "|"
            for (g = 1; g <= 6; g++) row(name[g] " | (all)", "group " g)
            row("total | crates", "sum")
            for (i = 1; i <= n; i++) v[cfg[i], "rest"] = v[cfg[i], ".text"] - v[cfg[i], "sum"]
            row("total | no crate (padding, code without a symbol)", "rest")
            row("total | `.text`", ".text")
            row("file | stripped binary", "stripped")
            split("chrono num_traits thiserror backon fastrand", card, " ")
            for (c = 1; c <= 5; c++) row("design card by symbol name | " card[c], "by-name:" card[c])
        }' "$figures"
}

for name in "${configs[@]}"; do setup "$name"; done
[ -z "${SETUP_ONLY:-}" ] || exit 0

if [ -n "${CRATES:-}" ]; then
    figures="$work/crates.txt"
    : >"$figures"
    for name in "${configs[@]}"; do
        stripped=$(bloat_build "$name")
        bloat_figures "$name" "$stripped" >>"$figures"
    done
    crates_table "$figures"
    exit 0
fi

# Raw figures, one a line, kept as they come: "<configuration> <figure> <value>".
results="$work/results.txt"
: >"$results"
record() { echo "$1 $2 $3" >>"$results"; echo "$1 $2 $3" >&2; }

debug_round() {
    local name crates cpu
    for name in "${configs[@]}"; do
        read -r crates cpu < <(debug_build "$name")
        record "$name" compiled "$crates"
        record "$name" cpu "$cpu"
    done
}

# The first debug round, then the sizes, then the other rounds: the runs interleave the
# configurations, so that the machine's load falls on all of them alike.
debug_round
for name in "${configs[@]}"; do
    [ "${SIZES:-1}" = 1 ] || continue
    record "$name" tree "$(cd "$work/$name" && "${cargo[@]}" tree --offline -q -e normal --prefix none | sed 's/ (\*)$//' | sort -u | wc -l)"
    record "$name" stripped "$(release_size "$name")"
done
for _ in $(seq 2 "$runs"); do debug_round; done

figure() { awk -v n="$1" -v f="$2" '$1 == n && $2 == f { print $3 }' "$results"; }
printf '| Configuration | Crates compiled | Crates in `cargo tree -e normal` | Debug build CPU s, median (runs) | Stripped release binary |\n'
printf '|---|---:|---:|---:|---:|\n'
for name in "${configs[@]}"; do
    printf '| %s | %s | %s | %s (%s) | %s |\n' "$name" \
        "$(figure "$name" compiled | median)" "$(figure "$name" tree)" \
        "$(figure "$name" cpu | median)" "$(figure "$name" cpu | paste -sd ' ')" \
        "$(figure "$name" stripped | awk '{ printf "%.2f MB", $1 / 1e6 }')"
done
