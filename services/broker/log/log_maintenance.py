"""Whole-segment maintenance of a `Log`: retention (deleting old segments) and the crash-safe
replacement of segments by the cleaner. A mixin of `Log`, kept apart so that module stays about
appends, reads, truncation and lifecycle; it uses the log's lock, segment view and offsets."""

from __future__ import annotations

import logging

from services.broker.log import retention
from services.broker.log.files import CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX, fsync_dir

logger = logging.getLogger("services.broker.log.log")


class LogMaintenance:
    # -- retention -----------------------------------------------------------------------------

    def delete_old_segments(self) -> int:
        """Applies retention (see `retention`); returns the number of segments deleted."""
        config = self.config
        deleted = 0
        if config.delete:
            if config.retention_ms >= 0:
                deleted += self._delete_old_segments(
                    retention.retention_ms_breached(self._clock.time_ms(), config.retention_ms))
            size = self.size_in_bytes
            if config.retention_bytes >= 0 and size >= config.retention_bytes:
                deleted += self._delete_old_segments(
                    retention.retention_size_breached(size, config.retention_bytes))
        deleted += self._delete_old_segments(retention.log_start_offset_breached(self._log_start_offset))
        return deleted

    def _delete_old_segments(self, predicate) -> int:
        with self._lock:
            self._check_open()
            doomed = retention.deletable_segments(self._view[1], self._end.message_offset,
                                                  self._high_watermark, predicate)
            if not doomed:
                return 0
            if len(doomed) == len(self._view[1]):
                self.roll()
            self._remove_and_delete_segments(doomed, async_delete=True)
            first = self._view[0][0]
            if first > self._log_start_offset:
                self.maybe_increment_log_start_offset(first)
            logger.info("%s: retention deleted segments %s",
                        self.topic_partition, [s.base_offset for s in doomed])
            return len(doomed)

    # -- segment replacement (compaction) ------------------------------------------------------

    def replace_segments(self, new_segments, old_segments) -> None:
        """Swaps `new_segments` (written with suffix `.cleaned`) in for `old_segments`, crash-safely.

        Steps, each made durable before the next: flush the new segments; rename them `.cleaned` ->
        `.swap`, highest base offset first (a crash before the last of these renames rolls the whole
        replacement back at load); move the old segments out of the log and rename them `.deleted`
        (deleted after `file.delete.delay.ms`); rename the new ones `.swap` -> final name. A crash
        after the first step that completes the `.swap` renames is completed at load. The active
        segment cannot be replaced.
        """
        with self._lock:
            self._check_open()
            new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
            old_sorted = sorted((s for s in old_segments if self._segments.get(s.base_offset) is s),
                                key=lambda s: s.base_offset)
            active = self._view[1][-1]
            if (any(s is active for s in old_sorted)
                    or any(s.base_offset >= active.base_offset for s in new_sorted)):
                raise ValueError("the active segment cannot be replaced")
            for segment in new_sorted:
                segment.on_become_inactive_segment()
                segment.flush()
            for segment in reversed(new_sorted):
                if segment.log.path.endswith(CLEANED_FILE_SUFFIX):
                    segment.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
            fsync_dir(self.dir)
            new_bases = {s.base_offset for s in new_sorted}
            for segment in old_sorted:
                if segment.base_offset not in new_bases:
                    del self._segments[segment.base_offset]
            for segment in new_sorted:
                self._segments[segment.base_offset] = segment
            self._publish_segments()
            self._delete_segment_files(old_sorted, async_delete=True)
            fsync_dir(self.dir)
            for segment in new_sorted:
                segment.change_file_suffixes(SWAP_FILE_SUFFIX, "")
            fsync_dir(self.dir)
