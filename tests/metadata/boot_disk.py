"""A disk that knows its boot, for the KIP-966 clean-restart tests: a process exit keeps the
page cache (same boot), a `crash` (power loss) starts a new boot."""
from metadata.incarnation_record import record_incarnation
from storage.memfs import MemFileSystem

DIRS = ["/d1", "/d2"]


class BootFS(MemFileSystem):
    """A disk whose page cache is lost only by `crash` (a power loss): a new boot."""

    def boot_id(self):
        return f"boot-{self.crashes}"


async def disk_with_incarnation(epoch: int) -> BootFS:
    """Both data dirs of DIRS, durable, holding an incarnation record of `epoch`."""
    fs = BootFS()
    for d in DIRS:
        fs.makedirs(d)
    await fs.sync_dir("/")
    await record_incarnation(fs, DIRS, epoch)
    return fs
