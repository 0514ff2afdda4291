// The type of driver.mjs's export: better-sqlite3's Database constructor (12 and 13 share it).
import Database from 'better-sqlite3';
export default Database;
