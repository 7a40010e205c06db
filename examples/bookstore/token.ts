// Prints a bearer token for the example's write routes (`make token`): signed with
// BOOKSTORE_JWT_SECRET, or the development key when it is unset, scope books:write, valid 12 hours.
import { bookstoreSecret, signBookstoreToken } from "./auth.js";

process.stdout.write(`${await signBookstoreToken(bookstoreSecret().secret, { subject: process.env.USER || "developer" })}\n`);
