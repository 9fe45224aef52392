"""A step's closing read and what it plans (exact peaks: docs/protocol.md,
"Exact peaks"): the step's peak and held memory against the last breakdown
step's, which says whether the next step reads its phases. Mixed into
:class:`_watch.Watcher`."""

from time import monotonic as _monotonic

from . import _cuda, _safe

# A plain step's closing edge (docs/protocol.md, "Exact peaks"): its only read.
SPAN_STEP = {"span": "step"}
# A plain step within this many bytes (or 1 % of the reference peak, if more)
# of the last breakdown step's peak and held memory is "the same phases": the
# allocator rounds large blocks to 2 MiB, so less is no change of shape.
NOISE_BYTES = 2 << 20


def rose(token, peak):
    """Whether ``peak``, read after the step ``token`` (Client.between) names,
    is above the memory that step held by more than the noise: max(2 MiB,
    1 % of the step's peak)."""
    return peak > token[0] + max(NOISE_BYTES, token[1] // 100)


class ClosingMixin:
    """The closing read of a step and its plan."""

    def _close_read(self):
        """A step at rest closes (its fast path, no lock): its one read, its
        plan and its ``step`` end edge, in one frame of the hook's besides the
        read's, as ``Client.switch("step", None, True, None,
        self._step_plan)`` makes them with two more. The common case is
        planned here: the binding's dict or the host's six values the step's
        only read, no figures kept, no phase read; any other goes to
        self._step_plan."""
        client = self._client
        raw = extra = None
        read = client.reader
        if read is not None:
            try:
                raw = read()
            except Exception as exc:  # noqa: BLE001
                _safe.report(exc)
            if raw is not None:
                try:
                    reads = client.peaks.step_reads
                    if len(reads) != 1 or self._edge_reads or self.figures is not None:
                        raise LookupError  # _plan's other cases
                    if type(raw) is tuple:  # six values (the host's RSS), as _plan takes them
                        best, held = raw[1], raw[0]
                        if best is None:
                            raise LookupError
                    else:  # the binding's dict, indexed in place
                        a = raw["allocated_bytes"]["all"]
                        best, held = a["peak"], a["current"]
                except (LookupError, TypeError, AttributeError):
                    extra = self._step_plan()
                else:  # _plan's case of one read, the step's phases unread
                    reads.clear()
                    client.between = (held, best, client.step)
                    ref = self._ref
                    if ref is not None:
                        low, high, held_low, held_high, extra = ref
                        if not (low <= best <= high and held_low <= held <= held_high):
                            extra = None
                    if extra is None:
                        self._moved = True
                        extra = SPAN_STEP
                    else:
                        self._moved = False
        t = _monotonic()
        if raw is not None:
            client.last_read = t
        # Client.switch's closing tuple: put() decides for a long queue or a
        # closed client, and the step's edges may have passed the batch.
        queue = client._queue
        pending = len(queue)
        if pending >= client._hold:
            client.put("step", None, raw, False, None, extra)
            return
        queue.append((t, "step", client.step, client.micro, "end", False, raw, extra,
                      client.model))
        if pending >= client._wake_from and not client._wake.is_set():
            client._wake.set()

    def _plan(self):
        """At a step's closing read (exact peaks; lock held): the step's peak
        (its reads' largest, a user's reset's included) and held memory (its
        last read's allocated) against the last breakdown step's. Returns the
        closing edge's extra fields: None on a breakdown step (which becomes
        the reference), ``span`` (and ``same_as`` within the noise) on a plain
        one; sets whether the next step reads its phases (docs/protocol.md,
        "Exact peaks")."""
        try:  # the step's end edge must go out whatever happens here
            client = self._client
            reads = client.peaks.step_reads
            best = held = None
            for r in reads:
                if type(r) is tuple and r[1] is not None:
                    p, h = r[1], r[0]  # six values (the host's RSS): no exception to catch
                else:
                    try:  # the binding's dict, indexed in place (a plain step has one)
                        a = r["allocated_bytes"]["all"]
                        p, h = a["peak"], a["current"]
                    except (KeyError, TypeError, IndexError):
                        pair = _cuda.peak_held(r)
                        if pair is None:
                            continue
                        p, h = pair
                if best is None or p > best:
                    best = p
                held = h
            reads.clear()
            if best is None:
                return None
            # What the sampler compares memory between this step and the
            # next with (saw_between); a new tuple each step.
            client.between = (held, best, client.step)
            if self._edge_reads:
                noise = max(NOISE_BYTES, best // 100)
                self._ref = (best - noise, best + noise, held - noise, held + noise,
                             {"span": "step", "same_as": client.step})
                self._moved = False
                return None
            ref = self._ref
            if ref is not None:
                low, high, held_low, held_high, same = ref
                if low <= best <= high and held_low <= held <= held_high:
                    self._moved = False
                    return same
            self._moved = True
            return SPAN_STEP
        except Exception as exc:  # noqa: BLE001
            _safe.report(exc)
            self._moved = True  # read the next step's phases
            return None

    def _plan_keeping(self):
        """_plan, after giving the step's reads to the figures it keeps."""
        try:
            self.figures.add(self._client.step, self._client.peaks.step_reads)
        except Exception as exc:  # noqa: BLE001 - the step's end edge goes out regardless
            _safe.report(exc)
        return self._plan()
