#!/bin/sh
# tools/emu/run.sh [MODEL]: run avx512_check.c (the AVX-512 kernels against
# the AVX2 ones, bit for bit) on an emulated AVX-512 CPU, for machines that
# lack one. Bochs (Debian's bochs package: its CPU models include AVX-512
# ones) boots Debian's kernel with the static check as init; the check's
# output comes back on the emulated serial port.
#   MODEL: corei7_skylake_x (AVX-512 F/BW/VL/DQ, no VNNI; default: the
#          model that boots) or corei7_icelake_u / tigerlake (+ VNNI; these
#          did not get past "LSM: Security Framework initializing" in Linux
#          6.1's boot here, 10-20 minutes, five tries).
# Needs: gcc, bochs bochsbios vgabios, isolinux syslinux-common xorriso cpio,
# apt-get download (for the kernel), root (mknod). About 10-15 minutes on a
# 2-core machine (skylake_x: ~8 to boot): the emulator runs some 40 million
# instructions a second.
# CATTN_EMU_KARGS replaces the kernel flag "quiet" (e.g. "loglevel=8
# ignore_loglevel" to see where a boot stops).
# The kernel is booted without XSAVES/XSAVEC and protection keys: Bochs 2.7
# reports the compacted XSAVE size and the PKRU state wrong, and Linux 6.1
# would otherwise turn XSAVE (and with it AVX) off.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL=${1:-corei7_skylake_x}
W=${CATTN_EMU_DIR:-/tmp/cattn-emu}
mkdir -p "$W/iso/isolinux" "$W/rd/dev" "$W/rd/tmp"
cd "$W"
if [ ! -f vmlinuz ]; then
  apt-get download "$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image/ {print $2; exit}')"
  dpkg-deb -x linux-image-*.deb k && cp k/boot/vmlinuz-* vmlinuz && rm -rf k linux-image-*.deb
fi
"$HERE/build.sh" "$W/rd/init" > /dev/null
[ -e rd/dev/console ] || mknod rd/dev/console c 5 1
(cd rd && find . | cpio -o -H newc 2> /dev/null | gzip -1 > ../iso/isolinux/initrd.gz)
cp vmlinuz iso/isolinux/vmlinuz
cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 iso/isolinux/
cat > iso/isolinux/isolinux.cfg <<CFG
DEFAULT t
PROMPT 0
TIMEOUT 0
LABEL t
  KERNEL vmlinuz
  APPEND initrd=initrd.gz console=ttyS0 rdinit=/init ${CATTN_EMU_KARGS:-quiet} mitigations=off clearcpuid=xsaves,xsavec,pku,ospke nopku
CFG
xorriso -as mkisofs -quiet -o check.iso -b isolinux/isolinux.bin -c isolinux/boot.cat \
  -no-emul-boot -boot-load-size 4 -boot-info-table iso 2> /dev/null
cat > bochsrc <<RC
cpu: model=$MODEL, count=1, ips=200000000
memory: guest=512, host=512
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/bochs/VGABIOS-lgpl-latest
ata0-master: type=cdrom, path=check.iso, status=inserted
boot: cdrom
com1: enabled=1, mode=file, dev=serial.txt
display_library: rfb, options="timeout=0"
log: bochs.log
panic: action=fatal
error: action=ignore
info: action=ignore
clock: sync=none
RC
printf 'c\nquit\n' > cont.rc
rm -f serial.txt
# Bochs writes the serial file buffered: the run ends when the VM powers off
timeout "${CATTN_EMU_TIMEOUT:-2400}" bochs -q -f bochsrc -rc cont.rc > bochs.out 2>&1 < /dev/null || true
grep -a -E "^(cpu:|default path|SELFTEST|ok  |FAIL|  path|ALL DONE|this CPU)" serial.txt || {
  echo "no output from the check: see $W/serial.txt and $W/bochs.out"; exit 2; }
grep -a -q "^ALL DONE failures=0 checks=[1-9]" serial.txt
