/** The order as the domain sees it. The HTTP schema (shared/orders/orderRequest.ts) validates input. */
export interface OrderItem {
  sku: string;
  quantity: number;
  unitPrice: number;
}

export interface ShippingAddress {
  name: string;
  line1: string;
  line2?: string;
  city: string;
  postalCode: string;
  country: string;
}

export interface Order {
  orderId: string;
  customerId: string;
  items: OrderItem[];
  shippingAddress: ShippingAddress;
  /** Hash of the submitted body, so a retried POST with another body under the same key is caught. */
  requestHash?: string;
  /**
   * Whose order it is (see shared/orders/callerScope.ts): only a client of this scope reads it.
   * '' or absent: unscoped (no X-Client-Id, no platform principal; also orders from before scopes
   * were recorded).
   */
  callerScope?: string;
  createdAt: Date;
}
