// The demo's hotel supplier in TypeScript: a twin of Go's demo/services
// hotels, served to esjet's workers through the TypeScript receiver. Route
// the trip's hotel commands here in the node's config:
//
//   workers:
//     book_hotel:   { target: nats, subject: hotels.book }
//     cancel_hotel: { target: nats, subject: hotels.cancel }
//
// and run: node dist/examples/hotels.js (ESJET_NATS_URL, default
// nats://127.0.0.1:4222; HOTELS_SLOW_MS delays each booking, to kill it
// mid-call). Bookings live in the KV bucket hotels_ledger, one per command
// id: the hotel's own books, which the receiver keeps from booking twice.
import { randomBytes } from "node:crypto";
import { connect } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { Receiver, encodeKey, terminal } from "../src/index.js";

interface Booking {
  booking_ref: string;
  command_id: string;
  traveler: string;
  destination: string;
  price: number;
  status: "booked" | "cancelled";
}

const url = process.env.ESJET_NATS_URL ?? "nats://127.0.0.1:4222";
const slowMs = Number(process.env.HOTELS_SLOW_MS ?? "0");
const nc = await connect({ servers: url, name: "hotels-ts", maxReconnectAttempts: -1 });
const rcv = await Receiver.create(nc, { bucket: "hotels_ts_receipts", leaseMs: 2000 });
const ledger = await new Kvm(nc).create("hotels_ledger", { history: 1 });
const enc = new TextEncoder();
const log = (msg: string) => console.log(msg);

const ref = () => "HT-" + randomBytes(4).toString("hex").toUpperCase().slice(0, 6);

const book = rcv.serve(nc, "hotels.book", async (m) => {
  const id = m.headers?.get("Esjet-Command-Id") ?? "";
  const p = m.json<{ traveler?: string; destination?: string; price?: number }>();
  if (!p.traveler || !p.destination || !(Number(p.price) > 0)) {
    throw terminal(`invalid payload: want traveler, destination and a positive price in cents`);
  }
  log(`effect ${id}`);
  if (slowMs > 0) await new Promise((r) => setTimeout(r, slowMs));
  const b: Booking = { booking_ref: ref(), command_id: id, traveler: p.traveler, destination: p.destination, price: Number(p.price), status: "booked" };
  try {
    await ledger.create(encodeKey(id), enc.encode(JSON.stringify(b)));
  } catch {
    // The hotel's books already hold this command's booking.
    const e = await ledger.get(encodeKey(id));
    const had = e?.json<Booking>();
    log(`already booked ${had?.booking_ref} for ${id}`);
    return { booking_ref: had?.booking_ref };
  }
  log(`booked ${b.booking_ref} for ${id}`);
  return { booking_ref: b.booking_ref };
}, { queue: "hotels-ts" });

const cancel = rcv.serve(nc, "hotels.cancel", async (m) => {
  const { booking_ref } = m.json<{ booking_ref?: string }>();
  if (!booking_ref?.startsWith("HT-")) throw terminal(`unknown booking_ref ${JSON.stringify(booking_ref)}: want HT-…`);
  for await (const k of await ledger.keys()) {
    const e = await ledger.get(k);
    const b = e?.operation === "PUT" ? e.json<Booking>() : undefined;
    if (e && b?.booking_ref === booking_ref) {
      b.status = "cancelled";
      await ledger.update(k, enc.encode(JSON.stringify(b)), e.revision);
      log(`cancelled ${booking_ref}`);
      return { cancelled: true };
    }
  }
  throw terminal(`unknown booking_ref ${booking_ref}`);
}, { queue: "hotels-ts" });

log(`hotels-ts ready on hotels.book, hotels.cancel (${url})`);
const stop = async () => {
  book.unsubscribe();
  cancel.unsubscribe();
  await nc.drain();
  process.exit(0);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
