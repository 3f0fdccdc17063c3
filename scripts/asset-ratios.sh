#!/usr/bin/env bash
# The asset story's compression figures, as committed files:
#   reports/asset-server/ratios.txt   each gzip and zstd level over the six models: ratio, MB/s
#   reports/asset-server/samples.txt  the 20 MiB model's parts against real glTF samples
# The samples are Debian's assimp-testmodels package's.
set -euo pipefail
models=target/release/asset-models
samples=/usr/share/assimp/models
out=reports/asset-server
if [[ ! -x $models ]]; then
    echo "error: $models is not built; hint: cargo build --release -p asset-server" >&2
    exit 2
fi
if [[ ! -d $samples/glTF2 ]]; then
    echo "error: no glTF samples under $samples; hint: apt-get install assimp-testmodels (Debian's, 20 MB)" >&2
    exit 2
fi
built=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
{
    echo "# \$ $models --ratios"
    echo "# $(date -u +%F), one thread, bulk (each level over every model in turn), on $(nproc) x $cpu; built at $built"
    "$models" --ratios
} > "$out/ratios.txt.tmp"
mv "$out/ratios.txt.tmp" "$out/ratios.txt"
files=(
    target/asset-models/avatar-4-20mib.glb
    "$samples/glTF/CesiumMilkTruck/CesiumMilkTruck.png"
    "$samples/glTF/CesiumMilkTruck/CesiumMilkTruck.bin"
    "$samples/glTF/CesiumMilkTruck/CesiumMilkTruck.gltf"
    "$samples/glTF2/2CylinderEngine-glTF-Binary/2CylinderEngine.glb"
)
{
    echo "# \$ $models --parts ${files[*]}"
    echo "# $(date -u +%F); the samples from Debian's assimp-testmodels $(dpkg-query -W -f '${Version}' assimp-testmodels 2>/dev/null || echo '(version unknown)')"
    "$models" --parts "${files[@]}"
} > "$out/samples.txt.tmp"
mv "$out/samples.txt.tmp" "$out/samples.txt"
echo "wrote $out/ratios.txt and $out/samples.txt"
