/**
 * The streams broker in the primary, on the fake cluster: a publish from one worker reaches every
 * worker with subscribers of the channel, numbered in one sequence per channel; a replay answers
 * from the pod's buffer; an exited worker is left out; a malformed request is refused.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { ChannelEvent } from "../src/index.js";
import { installStreams } from "../src/streams/primary.js";
import { streamsEvent, streamsInterest, streamsPiece, streamsPublish, streamsReplay } from "../src/streams/ipc.js";
import { fakeSupervisor, settle, stopFakeSupervisors } from "./helpers/fake-cluster.js";

afterEach(stopFakeSupervisors);

describe("the streams broker in the primary", () => {
  it("sends a publish of one worker to every worker subscribed to its channel, numbers each channel in one sequence, and replays from its buffer", async () => {
    const fake = fakeSupervisor({ workers: 2 }, { features: [(host) => installStreams(host)] });
    await fake.start();
    const [one, two] = [fake.cluster.slot(1), fake.cluster.slot(2)];
    const got = new Map<number, ChannelEvent[]>([[1, []], [2, []]]);
    one.app.on(streamsEvent, (event) => got.get(1)!.push(event));
    two.app.on(streamsEvent, (event) => got.get(2)!.push(event));
    for (const worker of [one, two]) {
      worker.app.send(streamsInterest, { channel: "room", subscribed: true });
      worker.app.send(streamsInterest, { channel: "other", subscribed: true });
    }

    const a = await one.app.request(streamsPublish, { channel: "room", data: '"a"', replayEvents: 10, replayBytes: 1 << 20, replayTotalBytes: 1 << 24 }, 1000);
    const b = await two.app.request(streamsPublish, { channel: "room", data: '"b"', replayEvents: 10, replayBytes: 1 << 20, replayTotalBytes: 1 << 24 }, 1000);
    const other = await two.app.request(streamsPublish, { channel: "other", data: "1", replayEvents: 10, replayBytes: 1 << 20, replayTotalBytes: 1 << 24 }, 1000);
    await settle();
    expect(got.get(1)!.map((e) => `${e.channel} ${e.seq} ${e.data}`)).toEqual(['room 1 "a"', 'room 2 "b"', "other 1 1"]);
    expect(got.get(2)).toEqual(got.get(1));
    expect(got.get(1)!.map((e) => e.id)).toEqual([a.id, b.id, other.id]);

    const plan = await two.app.request(streamsReplay, { channel: "room", lastEventId: a.id, maxBytes: 1 << 20 }, 1000);
    const epoch = a.id.split("-")[0]!;
    expect(plan).toEqual({ missed: 0, epoch, resume: 1, after: 1, to: 2 });
    expect(await two.app.request(streamsPiece, { channel: "room", after: 1, to: 2, maxBytes: 1000 }, 1000)).toEqual({ events: [got.get(1)![1]] });
    expect(await two.app.request(streamsReplay, { channel: "room", lastEventId: "garbage", maxBytes: 1 << 20 }, 1000)).toEqual({ missed: "unknown" });

    // Worker 2 exits: the next event goes to worker 1 alone, and nothing fails.
    two.exit(0);
    await settle();
    await one.app.request(streamsPublish, { channel: "room", data: '"c"', replayEvents: 10, replayBytes: 1 << 20, replayTotalBytes: 1 << 24 }, 1000);
    await settle();
    expect(got.get(1)!.map((e) => e.data)).toEqual(['"a"', '"b"', "1", '"c"']);
    expect(got.get(2)).toHaveLength(3);

    // Worker 1 has no subscriber of "other" any more: its events are not sent to it.
    one.app.send(streamsInterest, { channel: "other", subscribed: false });
    await one.app.request(streamsPublish, { channel: "other", data: "2", replayEvents: 10, replayBytes: 1 << 20, replayTotalBytes: 1 << 24 }, 1000);
    await one.app.request(streamsPublish, { channel: "quiet", data: "3", replayEvents: 10, replayBytes: 1 << 20, replayTotalBytes: 1 << 24 }, 1000);
    await settle();
    expect(got.get(1)!.map((e) => e.data)).toEqual(['"a"', '"b"', "1", '"c"']);

    await expect(one.app.request(streamsPublish, { channel: "", data: "1", replayEvents: 10, replayBytes: 1 << 20, replayTotalBytes: 1 << 24 }, 1000)).rejects.toThrow(/invalid stream channel/);
    await expect(one.app.request(streamsPublish, { channel: "room", data: 1 as unknown as string, replayEvents: 10, replayBytes: 1 << 20, replayTotalBytes: 1 << 24 }, 1000)).rejects.toThrow(/malformed streams:publish/);
    await expect(one.app.request(streamsPublish, { channel: "room", data: "1", replayEvents: 10, replayBytes: 0, replayTotalBytes: 1 << 24 }, 1000)).rejects.toThrow(/malformed streams:publish/);
    await expect(one.app.request(streamsPiece, { channel: "room", after: 0, to: 2, maxBytes: -1 }, 1000)).rejects.toThrow(/malformed streams:piece/);
  });
});
